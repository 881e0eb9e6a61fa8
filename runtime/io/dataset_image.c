/* dataset_image.c -- ImageFolder: class subfolders of PNG and JPEG files
 * decoded by libpng and libjpeg-turbo, through torchvision's transforms.
 *
 * Invariant: an item is a pure function of (file, key): every call decodes
 * the file again and draws its random transforms from key alone, so worker
 * threads and the main thread give the same item. The scan (dataset.h's
 * fsS_imagefolder) lives here too; fsS_get (dataset.c) calls fsS_image_item. */
#define _DEFAULT_SOURCE /* DT_DIR, strdup */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <png.h>

#include "dataio.h"
#include "dataset.h"
#include "rng.h"

/* Larger images are refused before any pixel is allocated (a corrupt header). */
#define MAX_PIXELS ((uint64_t)1 << 28)

/* ---- decoding ----------------------------------------------------------------------------- */

static int decode_png(const uint8_t *data, size_t n, uint8_t **rgb, int64_t *h, int64_t *w, char **why) {
  png_image im;
  memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&im, data, n)) {
    *why = fsIO_errf("corrupt PNG: %s", im.message);
    return -1;
  }
  if ((uint64_t)im.width * im.height > MAX_PIXELS) {
    *why = fsIO_errf("PNG of %ux%u pixels is too large", im.width, im.height);
    png_image_free(&im);
    return -1;
  }
  im.format = PNG_FORMAT_RGB;
  size_t bytes = PNG_IMAGE_SIZE(im);
  uint8_t *buf = malloc(bytes + 1);
  if (!buf || !png_image_finish_read(&im, NULL, buf, 0, NULL)) {
    *why = buf ? fsIO_errf("corrupt PNG: %s", im.message) : fsIO_errf("out of memory");
    free(buf);
    png_image_free(&im);
    return -1;
  }
  *rgb = buf;
  *h = im.height;
  *w = im.width;
  return 0;
}

typedef struct jpeg_err {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
  char msg[JMSG_LENGTH_MAX];
  bool warned; /* libjpeg only warns about truncated data: that is corruption too */
} jpeg_err;

static void jpeg_fail(j_common_ptr c) {
  jpeg_err *e = (jpeg_err *)c->err;
  c->err->format_message(c, e->msg);
  longjmp(e->jb, 1);
}

static void jpeg_note(j_common_ptr c, int level) {
  jpeg_err *e = (jpeg_err *)c->err;
  if (level < 0 && !e->warned) { /* warnings: keep the first one, print nothing */
    c->err->format_message(c, e->msg);
    e->warned = true;
  }
}

static int decode_jpeg(const uint8_t *data, size_t n, uint8_t **rgb, int64_t *h, int64_t *w, char **why) {
  struct jpeg_decompress_struct cinfo;
  jpeg_err e;
  uint8_t *volatile buf = NULL;
  memset(&e, 0, sizeof e);
  cinfo.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = jpeg_fail;
  e.pub.emit_message = jpeg_note;
  if (setjmp(e.jb)) {
    *why = fsIO_errf("corrupt JPEG: %s", e.msg);
    jpeg_destroy_decompress(&cinfo);
    free(buf);
    return -1;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, (unsigned long)n);
  jpeg_read_header(&cinfo, TRUE);
  if ((uint64_t)cinfo.image_width * cinfo.image_height > MAX_PIXELS) {
    snprintf(e.msg, sizeof e.msg, "%ux%u pixels is too large", cinfo.image_width, cinfo.image_height);
    longjmp(e.jb, 1);
  }
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  size_t stride = (size_t)cinfo.output_width * 3;
  buf = malloc(stride * cinfo.output_height + 1);
  if (!buf) {
    snprintf(e.msg, sizeof e.msg, "out of memory");
    longjmp(e.jb, 1);
  }
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = buf + stride * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  if (e.warned) longjmp(e.jb, 1);
  *h = cinfo.output_height;
  *w = cinfo.output_width;
  jpeg_destroy_decompress(&cinfo);
  *rgb = buf;
  return 0;
}

int fsS_image_decode(const uint8_t *data, size_t n, uint8_t **rgb, int64_t *h, int64_t *w, char **why) {
  *why = NULL;
  if (n >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8)) return decode_png(data, n, rgb, h, w, why);
  if (n >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
    return decode_jpeg(data, n, rgb, h, w, why);
  *why = fsIO_errf(n ? "not a PNG or JPEG file" : "empty file, not a PNG or JPEG image");
  return -1;
}

/* ---- transforms on a float CHW image ------------------------------------------------------ */

typedef struct img { float *p; int64_t h, w; bool scaled; } img;

/* out = the [top, top + oh) x [left, left + ow) window of *m, zeros outside it */
static int crop(img *m, int64_t top, int64_t left, int64_t oh, int64_t ow) {
  float *o = calloc((size_t)(3 * oh * ow) + 1, sizeof *o);
  if (!o) return -1;
  for (int c = 0; c < 3; c++)
    for (int64_t y = 0; y < oh; y++) {
      int64_t sy = y + top;
      if (sy < 0 || sy >= m->h) continue;
      for (int64_t x = 0; x < ow; x++) {
        int64_t sx = x + left;
        if (sx >= 0 && sx < m->w) o[(c * oh + y) * ow + x] = m->p[(c * m->h + sy) * m->w + sx];
      }
    }
  free(m->p);
  *m = (img){o, oh, ow, m->scaled};
  return 0;
}

/* bilinear, half-pixel centres (torch's interpolate, align_corners=False) */
static int resize(img *m, int64_t oh, int64_t ow) {
  float *o = malloc((size_t)(3 * oh * ow + 1) * sizeof *o);
  if (!o) return -1;
  double sh = (double)m->h / (double)oh, sw = (double)m->w / (double)ow;
  for (int64_t y = 0; y < oh; y++) {
    double fy = fmax((y + 0.5) * sh - 0.5, 0);
    int64_t y0 = (int64_t)fy, y1 = y0 + 1 < m->h ? y0 + 1 : y0;
    double ly = fy - (double)y0;
    for (int64_t x = 0; x < ow; x++) {
      double fx = fmax((x + 0.5) * sw - 0.5, 0);
      int64_t x0 = (int64_t)fx, x1 = x0 + 1 < m->w ? x0 + 1 : x0;
      double lx = fx - (double)x0;
      for (int c = 0; c < 3; c++) {
        const float *s = m->p + c * m->h * m->w;
        double v = (1 - ly) * ((1 - lx) * s[y0 * m->w + x0] + lx * s[y0 * m->w + x1]) +
                   ly * ((1 - lx) * s[y1 * m->w + x0] + lx * s[y1 * m->w + x1]);
        o[(c * oh + y) * ow + x] = (float)(m->scaled ? v : nearbyint(v)); /* PIL keeps bytes */
      }
    }
  }
  free(m->p);
  *m = (img){o, oh, ow, m->scaled};
  return 0;
}

static double u01(uint64_t key, size_t k) { return (double)(fsR_bits(key, k) >> 11) * 0x1p-53; }

static int apply(const fsS_transform *t, size_t k, img *m, uint64_t key, char **why) {
  switch (t->kind) {
  case FSS_TF_RESIZE: {
    int64_t oh = t->h, ow = t->w;
    if (ow < 0) { /* the shorter side becomes h, the longer keeps the ratio (truncated) */
      if (m->w <= m->h) ow = t->h, oh = (int64_t)((double)t->h * (double)m->h / (double)m->w);
      else oh = t->h, ow = (int64_t)((double)t->h * (double)m->w / (double)m->h);
    }
    if (oh < 1 || ow < 1 || (uint64_t)oh * (uint64_t)ow > MAX_PIXELS) {
      *why = fsIO_errf("Resize to %lldx%lld pixels is not possible", (long long)oh, (long long)ow);
      return -1;
    }
    return resize(m, oh, ow);
  }
  case FSS_TF_CENTER_CROP: /* torchvision pads with zeros when the crop is larger */
    return crop(m, t->h > m->h ? -((t->h - m->h) / 2) : (int64_t)nearbyint((double)(m->h - t->h) / 2.0),
                t->w > m->w ? -((t->w - m->w) / 2) : (int64_t)nearbyint((double)(m->w - t->w) / 2.0), t->h, t->w);
  case FSS_TF_RANDOM_CROP: {
    int64_t ph = m->h + 2 * t->padding, pw = m->w + 2 * t->padding;
    if (ph < t->h || pw < t->w) {
      *why = fsIO_errf("Required crop size (%lld, %lld) is larger than input image size (%lld, %lld)",
                       (long long)t->h, (long long)t->w, (long long)ph, (long long)pw);
      return -1;
    }
    int64_t top = (int64_t)(u01(key, 2 * k) * (double)(ph - t->h + 1));
    int64_t left = (int64_t)(u01(key, 2 * k + 1) * (double)(pw - t->w + 1));
    return crop(m, top - t->padding, left - t->padding, t->h, t->w);
  }
  case FSS_TF_HFLIP:
    if (u01(key, 2 * k) < t->p)
      for (int64_t r = 0; r < 3 * m->h; r++)
        for (int64_t x = 0; x < m->w / 2; x++) {
          float *row = m->p + r * m->w, v = row[x];
          row[x] = row[m->w - 1 - x];
          row[m->w - 1 - x] = v;
        }
    return 0;
  case FSS_TF_TO_TENSOR:
    for (int64_t i = 0; i < 3 * m->h * m->w; i++) m->p[i] /= 255.0f;
    m->scaled = true;
    return 0;
  case FSS_TF_NORMALIZE:
    for (int c = 0; c < 3; c++)
      for (int64_t i = 0; i < m->h * m->w; i++) {
        float *v = &m->p[c * m->h * m->w + i];
        *v = (*v - t->mean[c]) / t->std[c];
      }
    return 0;
  }
  return 0;
}

/* The file decoded and transformed: a float CHW image (p malloc'd). */
static int load(const char *path, const fsS_transform *tf, size_t ntf, uint64_t key, img *out, char **err) {
  uint8_t *data, *rgb = NULL;
  size_t n;
  char *why = NULL;
  if (fsIO_slurp(path, &data, &n, err) != 0) return -1;
  int64_t h, w;
  int rc = fsS_image_decode(data, n, &rgb, &h, &w, &why);
  free(data);
  img m = {NULL, h, w, false};
  if (rc == 0 && !(m.p = malloc((size_t)(3 * h * w + 1) * sizeof *m.p))) why = fsIO_errf("out of memory");
  for (int64_t i = 0; m.p && i < h * w; i++)
    for (int c = 0; c < 3; c++) m.p[c * h * w + i] = rgb[3 * i + c];
  free(rgb);
  for (size_t k = 0; m.p && k < ntf; k++)
    if (apply(&tf[k], k, &m, key, &why) != 0) {
      if (!why) why = fsIO_errf("out of memory");
      break;
    }
  if (why) {
    free(m.p);
    fsIO_fail(err, "%s: %s", path, why);
    free(why);
    return -1;
  }
  *out = m;
  return 0;
}

int fsS_image_item(const fsS_dataset *ds, size_t i, uint64_t key, float *x, int64_t *y, char **err) {
  img m;
  if (load(ds->paths[i], ds->tf, ds->ntf, key, &m, err) != 0) return -1;
  if (m.h != ds->x.shape[1] || m.w != ds->x.shape[2]) {
    fsIO_fail(err, "%s: the transformed image is %lldx%lld, the data set's items are %lldx%lld (the first "
              "image's size); a Resize((h, w)) or a crop makes every item the same size",
              ds->paths[i], (long long)m.h, (long long)m.w, (long long)ds->x.shape[1], (long long)ds->x.shape[2]);
    free(m.p);
    return -1;
  }
  memcpy(x, m.p, (size_t)(3 * m.h * m.w) * sizeof *x);
  free(m.p);
  *y = ds->targets[i];
  return 0;
}

/* ---- the folder scan ---------------------------------------------------------------------- */

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool image_ext(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

/* torchvision's IMG_EXTENSIONS that this reader cannot decode */
static bool other_image_ext(const char *name) {
  static const char *const ext[] = {".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
  const char *dot = strrchr(name, '.');
  for (size_t k = 0; dot && k < sizeof ext / sizeof *ext; k++)
    if (!strcasecmp(dot, ext[k])) return true;
  return false;
}

typedef struct names { char **v; size_t n, cap; } names;

static int add(names *s, char *x) {
  if (!x) return -1;
  if (s->n == s->cap) {
    size_t c = s->cap ? 2 * s->cap : 16;
    char **p = realloc(s->v, c * sizeof *p);
    if (!p) {
      free(x);
      return -1;
    }
    s->v = p;
    s->cap = c;
  }
  s->v[s->n++] = x;
  return 0;
}

static void names_free(names *s) {
  for (size_t k = 0; k < s->n; k++) free(s->v[k]);
  free(s->v);
  memset(s, 0, sizeof *s);
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Entries of dir, sorted: subdirectories into dirs (full paths), files into files. */
static int list_dir(const char *dir, names *dirs, names *files, char **err) {
  DIR *d = opendir(dir);
  if (!d) return fsIO_fail(err, "%s: cannot open the directory: %s", dir, strerror(errno));
  struct dirent *e;
  int rc = 0;
  while (rc == 0 && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue; /* torchvision's os.scandir keeps dot files; hidden files are rarely images */
    char *p = fsIO_errf("%s/%s", dir, e->d_name);
    rc = !p ? -1 : is_dir(p) ? add(dirs, p) : files ? add(files, p) : (free(p), 0);
  }
  closedir(d);
  if (rc) return fsIO_fail(err, "%s: out of memory listing the directory", dir);
  if (dirs->n) qsort(dirs->v, dirs->n, sizeof *dirs->v, by_name);
  if (files && files->n) qsort(files->v, files->n, sizeof *files->v, by_name);
  return 0;
}

/* Every file under dir, depth first in sorted order (os.walk, sorted), into out. */
static int walk(const char *dir, names *out, int depth, char **err) {
  names dirs = {0}, files = {0};
  if (depth > 32) return fsIO_fail(err, "%s: directories nested more than 32 deep", dir);
  if (list_dir(dir, &dirs, &files, err) != 0) return -1;
  int rc = 0;
  for (size_t k = 0; rc == 0 && k < files.n; k++) {
    rc = add(out, files.v[k]);
    files.v[k] = NULL;
    if (rc) fsIO_fail(err, "%s: out of memory", dir);
  }
  for (size_t k = 0; rc == 0 && k < dirs.n; k++) rc = walk(dirs.v[k], out, depth + 1, err);
  names_free(&dirs);
  names_free(&files);
  return rc;
}

int fsS_imagefolder(fsS_dataset *ds, const char *root, const fsS_transform *tf, size_t ntf, char **err) {
  memset(ds, 0, sizeof *ds);
  bool tensor = false;
  int64_t fixed_h = -1, fixed_w = -1;
  for (size_t k = 0; k < ntf; k++) {
    if (tf[k].kind == FSS_TF_TO_TENSOR) tensor = true;
    if (tf[k].kind == FSS_TF_NORMALIZE && !tensor)
      return fsIO_fail(err, "ImageFolder(): Normalize needs a tensor: put ToTensor() before it");
    if (tf[k].kind == FSS_TF_CENTER_CROP || tf[k].kind == FSS_TF_RANDOM_CROP ||
        (tf[k].kind == FSS_TF_RESIZE && tf[k].w > 0))
      fixed_h = tf[k].h, fixed_w = tf[k].w;
    else if (tf[k].kind == FSS_TF_RESIZE)
      fixed_h = fixed_w = -1;
  }
  if (!tensor)
    return fsIO_fail(err, "ImageFolder(): the transform must include ToTensor(): items are tensors "
                          "(there are no PIL images here)");
  names classes = {0}, files = {0};
  if (!is_dir(root)) return fsIO_fail(err, "%s: not a directory (ImageFolder's root holds one folder per class)", root);
  if (list_dir(root, &classes, NULL, err) != 0) {
    names_free(&classes);
    return -1;
  }
  if (classes.n == 0) {
    names_free(&classes);
    return fsIO_fail(err, "%s: Couldn't find any class folder in %s.", root, root);
  }
  size_t *first = calloc(classes.n + 1, sizeof *first);
  int rc = first ? 0 : fsIO_fail(err, "%s: out of memory", root);
  for (size_t c = 0; rc == 0 && c < classes.n; c++) {
    first[c] = files.n;
    rc = walk(classes.v[c], &files, 0, err);
  }
  if (first) first[classes.n] = files.n;
  /* keep PNG and JPEG files; refuse the image formats torchvision would read and this cannot */
  size_t kept = 0;
  ds->targets = rc == 0 ? malloc((files.n + 1) * sizeof *ds->targets) : NULL;
  if (rc == 0 && !ds->targets) rc = fsIO_fail(err, "%s: out of memory", root);
  size_t k = 0;
  for (size_t c = 0; rc == 0 && c < classes.n; c++) {
    size_t before = kept;
    for (; rc == 0 && k < first[c + 1]; k++) {
      if (other_image_ext(files.v[k])) {
        rc = fsIO_fail(err, "%s: only PNG and JPEG images can be read", files.v[k]);
        break;
      }
      if (!image_ext(files.v[k])) {
        free(files.v[k]);
        continue;
      }
      ds->targets[kept] = (int64_t)c;
      files.v[kept++] = files.v[k];
    }
    if (rc == 0 && kept == before)
      rc = fsIO_fail(err, "%s: Found no valid file for the classes %s. Supported extensions are: .png, .jpg, .jpeg",
                     root, strrchr(classes.v[c], '/') + 1);
  }
  for (; k < files.n; k++) free(files.v[k]); /* after an error: the files not reached */
  free(first);
  files.n = kept;
  ds->kind = FSS_IMAGES;
  ds->paths = files.v;
  ds->len = kept;
  /* class names without the root */
  for (size_t c = 0; c < classes.n; c++) {
    char *name = strdup(strrchr(classes.v[c], '/') + 1);
    if (!name) rc = rc ? rc : fsIO_fail(err, "%s: out of memory", root);
    free(classes.v[c]);
    classes.v[c] = name;
  }
  ds->classes_names = classes.v;
  ds->nclasses = classes.n;
  ds->tf = rc == 0 ? malloc((ntf + 1) * sizeof *tf) : NULL;
  if (rc == 0 && !ds->tf) rc = fsIO_fail(err, "%s: out of memory", root);
  if (rc == 0) memcpy(ds->tf, tf, ntf * sizeof *tf);
  ds->ntf = ntf;
  if (rc == 0 && fixed_h < 0) { /* the first image's size is every item's */
    img m;
    if ((rc = load(ds->paths[0], tf, ntf, 0, &m, err)) == 0) {
      fixed_h = m.h;
      fixed_w = m.w;
      free(m.p);
    }
  }
  if (rc != 0) {
    fsS_free(ds);
    return -1;
  }
  ds->x = (fsS_layout){FS_F32, 3, {3, fixed_h, fixed_w}, (size_t)(3 * fixed_h * fixed_w) * sizeof(float)};
  ds->y = (fsS_layout){FS_I64, 0, {0}, sizeof(int64_t)};
  return 0;
}
