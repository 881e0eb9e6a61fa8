/* io_int.h -- what the files of runtime/io share privately: the pickle
 * value tree's constructors, which the pickler (pickle.c) and the
 * restricted unpickler (unpickle.c) both build values with. */
#ifndef FS_IO_INT_H
#define FS_IO_INT_H

#include <stdbool.h>
#include <stdint.h>
#include "pickle.h"

/* *v (n of *cap elements of size elem used) with room for one more; -1 on OOM. */
int fsQ_room(void **v, size_t n, size_t *cap, size_t elem);
/* A new value of d (owned by d); NULL on OOM. */
fsQ_value *fsQ_value_new(fsQ_doc *d, fsQ_kind kind);
/* A str value holding a copy of s[0..len); NULL on OOM. */
fsQ_value *fsQ_str_new(fsQ_doc *d, const void *s, size_t len);
/* s[0..n) is UTF-8 (surrogatepass: encoded surrogates allowed, as pickle's
 * BINUNICODE writes them). */
bool fsQ_utf8_ok(const uint8_t *s, size_t n, bool surrogatepass);

/* The pickle opcodes the pickler writes and the unpickler reads. */
enum {
  OP_MARK = '(', OP_STOP = '.', OP_BINFLOAT = 'G', OP_BININT = 'J', OP_BININT1 = 'K', OP_BININT2 = 'M',
  OP_NONE = 'N', OP_BINPERSID = 'Q', OP_REDUCE = 'R', OP_SHORT_BINSTRING = 'U', OP_BINUNICODE = 'X',
  OP_APPEND = 'a', OP_BUILD = 'b', OP_GLOBAL = 'c', OP_APPENDS = 'e', OP_BINGET = 'h', OP_LONG_BINGET = 'j',
  OP_BINPUT = 'q', OP_LONG_BINPUT = 'r', OP_SETITEM = 's', OP_TUPLE = 't', OP_SETITEMS = 'u',
  OP_EMPTY_DICT = '}', OP_EMPTY_LIST = ']', OP_EMPTY_TUPLE = ')', OP_PROTO = 0x80, OP_NEWOBJ = 0x81,
  OP_TUPLE1 = 0x85, OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87, OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89,
  OP_LONG1 = 0x8a, OP_EMPTY_SET = 0x8f,
};

#endif
