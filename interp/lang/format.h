/* format.h -- Python's format(value, spec) for the f-string subset:
 * [[fill]align][sign][0][width][,|_][.precision][type], types d f F e E g G % s
 * and none, on bool, int, float and str (other values: repr, no spec). */
#ifndef FS_FORMAT_H
#define FS_FORMAT_H

#include "value.h"

/* malloc'd text, or NULL + fsV_error ("Unknown format code 'd' for object of
 * type 'float'", "Invalid format specifier '...' for object of type 'int'"). */
char *fsV_format(const fs_value *v, const char *spec);

#endif
