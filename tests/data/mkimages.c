/* mkimages.c -- writes an ImageFolder tree of PNG and JPEG files for the
 * regression scripts' fixtures and scripts/bench-data (the project itself only
 * reads images; this is its test-side writer, on the same libpng/libjpeg).
 *
 *   mkimages DIR CLASSES PER_CLASS HEIGHT WIDTH png|jpg|mix
 *
 * DIR/class<c>/img<i>.<ext>: pixel (y, x, ch) = a gradient plus a class- and
 * image-dependent pattern, so every file differs and decoding costs what a
 * photo of that size costs. Exit status 1 on any write error. */
#include <stdio.h> /* before jpeglib.h, which uses FILE and size_t */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <png.h>

static int write_png(const char *path, const unsigned char *rgb, int h, int w) {
  png_image im;
  memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  im.width = (png_uint_32)w;
  im.height = (png_uint_32)h;
  im.format = PNG_FORMAT_RGB;
  return png_image_write_to_file(&im, path, 0, rgb, 0, NULL) ? 0 : -1;
}

static int write_jpg(const char *path, const unsigned char *rgb, int h, int w) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * (size_t)w * 3);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: mkimages DIR CLASSES PER_CLASS HEIGHT WIDTH png|jpg|mix\n");
    return 2;
  }
  int classes = atoi(argv[2]), per = atoi(argv[3]), h = atoi(argv[4]), w = atoi(argv[5]);
  const char *kind = argv[6];
  unsigned char *rgb = malloc((size_t)h * (size_t)w * 3);
  char path[4096];
  if (!rgb || classes < 1 || per < 1 || h < 1 || w < 1) return 2;
  mkdir(argv[1], 0777);
  unsigned state = 12345;
  for (int c = 0; c < classes; c++) {
    snprintf(path, sizeof path, "%s/class%d", argv[1], c);
    mkdir(path, 0777);
    for (int i = 0; i < per; i++) {
      for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
          for (int ch = 0; ch < 3; ch++) {
            state = state * 1103515245u + 12345u;
            int v = (x * 255 / w + y * (c + 1) * 7 + ch * 40 + i * 13 + (int)(state >> 28)) & 255;
            rgb[((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)ch] = (unsigned char)v;
          }
      int jpg = !strcmp(kind, "jpg") || (!strcmp(kind, "mix") && i % 2);
      snprintf(path, sizeof path, "%s/class%d/img%03d.%s", argv[1], c, i, jpg ? "jpg" : "png");
      if ((jpg ? write_jpg(path, rgb, h, w) : write_png(path, rgb, h, w)) != 0) {
        fprintf(stderr, "mkimages: cannot write %s\n", path);
        return 1;
      }
    }
  }
  free(rgb);
  return 0;
}
