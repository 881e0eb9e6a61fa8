/* idx.h -- IDX files (the MNIST / Fashion-MNIST format), gzip or plain.
 *
 * Layout: a big-endian magic 0x000008NN (two zero bytes, element type 0x08 =
 * unsigned byte, NN = number of dimensions), NN big-endian uint32 sizes, then
 * exactly the product of the sizes in bytes. Only unsigned-byte files with
 * 1 (labels, magic 0x00000801) or 3 (images, magic 0x00000803) dimensions
 * are accepted: that is all MNIST-shaped data sets use. */
#ifndef FS_IDX_H
#define FS_IDX_H

#include <stddef.h>
#include <stdint.h>

typedef struct fsI_array {
  uint8_t *data;     /* count * item bytes, decompressed */
  int ndim;          /* 1 or 3 */
  uint32_t dims[3];  /* dims[0] = count */
  size_t item;       /* bytes per item: product of dims[1..ndim) */
} fsI_array;

/* Reads path (zlib reads plain files transparently) expecting ndim
 * dimensions; `what` names the payload in messages ("image", "label").
 * -1 + *err naming the file and the problem; nothing is left allocated. */
int fsI_read(const char *path, int ndim, const char *what, fsI_array *out, char **err);
void fsI_free(fsI_array *a);

#endif
