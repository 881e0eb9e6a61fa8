/* tfevents.c -- TensorBoard's event files, written by hand: the TFRecord
 * framing (length, masked CRC-32C of the length, data, masked CRC-32C of
 * the data) around Event protocol buffers encoded field by field.
 *
 * Invariant: every record goes to the file in one write() of its whole
 * framing (continued only after a partial write), so a reader sees whole
 * records (a killed run can cut only the last one). Messages are encoded as protobuf's own serializer orders them
 * (by field number; proto3 defaults left out), with the field numbers of
 * tensorboard's event.proto, summary.proto and the hparams plugin's
 * api.proto / plugin_data.proto. Its other half: logger.c decides when to
 * write; tests/tfevents-read.py decodes the files independently. */
#define _POSIX_C_SOURCE 200809L
#include "logger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dataio.h"

struct fsLG_events {
  int fd;
  char *path;
};

/* ---- CRC-32C ------------------------------------------------------------------------- */

uint32_t fsLG_crc32c(const void *data, size_t n) {
  static uint32_t table[256];
  if (!table[1]) /* reflected Castagnoli polynomial */
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
  const unsigned char *p = data;
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t fsLG_masked_crc(const void *data, size_t n) {
  uint32_t c = fsLG_crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---- protocol buffers ---------------------------------------------------------------- */

typedef fsT_buf pb; /* a message being encoded */

static void pb_varint(pb *p, uint64_t v) {
  unsigned char b[10];
  size_t n = 0;
  do {
    b[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  fsT_buf_put(p, b, n);
}

enum { WIRE_VARINT = 0, WIRE_64 = 1, WIRE_BYTES = 2, WIRE_32 = 5 };
static void pb_key(pb *p, int field, int wire) { pb_varint(p, (uint64_t)field << 3 | (uint64_t)wire); }

static void pb_double(pb *p, int field, double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  pb_key(p, field, WIRE_64);
  fsIO_put_le(p, u, 8);
}

static void pb_float(pb *p, int field, float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  pb_key(p, field, WIRE_32);
  fsIO_put_le(p, u, 4);
}

static void pb_bytes(pb *p, int field, const void *s, size_t n) {
  pb_key(p, field, WIRE_BYTES);
  pb_varint(p, n);
  fsT_buf_put(p, s, n);
}

static void pb_str(pb *p, int field, const char *s) { pb_bytes(p, field, s, strlen(s)); }

/* A submessage: sub's bytes as field (sub is freed). */
static void pb_msg(pb *p, int field, pb *sub) {
  if (sub->oom) p->oom = true;
  pb_bytes(p, field, sub->p ? sub->p : (const uint8_t *)"", sub->n);
  free(sub->p);
  *sub = (pb){0};
}

/* ---- records ---------------------------------------------------------------------------- */

static double wall_time(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* n bytes at the end of the file, the rest again after a partial write. */
static int append(int fd, const unsigned char *b, size_t n) {
  while (n) {
    ssize_t k = write(fd, b, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

/* One record of the Event e (freed), in one write. */
static int write_event(fsLG_events *ev, pb *e, char **err) {
  pb r = {0};
  if (!e->oom) {
    fsIO_put_le(&r, e->n, 8);
    uint32_t c = fsLG_masked_crc(r.p, 8);
    fsIO_put_le(&r, c, 4);
    fsT_buf_put(&r, e->p, e->n);
    fsIO_put_le(&r, fsLG_masked_crc(e->p, e->n), 4);
  }
  bool oom = e->oom || r.oom;
  free(e->p);
  *e = (pb){0};
  int rc = 0;
  if (oom) rc = fsIO_fail(err, "%s: out of memory", ev->path);
  else if (append(ev->fd, r.p, r.n) < 0)
    rc = fsIO_fail(err, "%s: cannot write: %s", ev->path, strerror(errno));
  free(r.p);
  return rc;
}

/* An Event's head: wall_time and step (none for FSLG_STEP_NONE). */
static void event_head(pb *e, int64_t step) {
  pb_double(e, 1, wall_time());
  if (step != FSLG_STEP_NONE && step != 0) { /* proto3 leaves 0 out */
    pb_key(e, 2, WIRE_VARINT);
    pb_varint(e, (uint64_t)step);
  }
}

fsLG_events *fsLG_events_open(const char *dir, char **err) {
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  fsLG_events *ev = calloc(1, sizeof *ev);
  if (!ev || !(ev->path = fsIO_errf("%s/events.out.tfevents.%010lld.%s.%ld.0", dir, (long long)time(NULL), host,
                                    (long)getpid()))) {
    free(ev);
    fsIO_fail(err, "%s: out of memory", dir);
    return NULL;
  }
  ev->fd = open(ev->path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
  if (ev->fd < 0) {
    fsIO_fail(err, "%s: cannot create the event file: %s", ev->path, strerror(errno));
    free(ev->path);
    free(ev);
    return NULL;
  }
  pb e = {0};
  pb_double(&e, 1, wall_time());
  pb_str(&e, 3, "brain.Event:2");
  if (write_event(ev, &e, err) < 0) {
    fsLG_events_close(ev);
    return NULL;
  }
  return ev;
}

const char *fsLG_events_path(const fsLG_events *ev) { return ev->path; }

void fsLG_events_close(fsLG_events *ev) {
  if (!ev) return;
  close(ev->fd);
  free(ev->path);
  free(ev);
}

int fsLG_events_scalars(fsLG_events *ev, const fsLG_metric *m, size_t n, int64_t step, char **err) {
  for (size_t i = 0; i < n; i++) {
    pb value = {0}, summary = {0}, e = {0};
    pb_str(&value, 1, m[i].name); /* Summary.Value: tag 1, simple_value 2 */
    pb_float(&value, 2, (float)m[i].value);
    pb_msg(&summary, 1, &value);
    event_head(&e, step);
    pb_msg(&e, 5, &summary);
    if (write_event(ev, &e, err) < 0) return -1;
  }
  return 0;
}

/* ---- the hparams plugin ------------------------------------------------------------------ */

/* Summary { value { tag, metadata { plugin_data { "hparams", content } } } } as an Event. */
static int plugin_event(fsLG_events *ev, const char *tag, pb *content, int64_t step, char **err) {
  pb plugin = {0}, meta = {0}, value = {0}, summary = {0}, e = {0};
  pb_str(&plugin, 1, "hparams");
  pb_msg(&plugin, 2, content);
  pb_msg(&meta, 1, &plugin);
  pb_str(&value, 1, tag);
  pb_msg(&value, 9, &meta);
  pb_msg(&summary, 1, &value);
  event_head(&e, step);
  pb_msg(&e, 5, &summary);
  return write_event(ev, &e, err);
}

int fsLG_events_hparams(fsLG_events *ev, const fsLG_hparam *h, size_t n, const char *const *metrics,
                        size_t nmetrics, int64_t step, char **err) {
  /* HParamsPluginData (version 0, left out) { experiment 2 { hparam_infos 4 { name 1, type 4 },
   * metric_infos 5 { name 1 { tag 2 } } } }; torch's hparams() takes bool as a number (bool is
   * an int in Python) and leaves None out */
  enum { DATA_TYPE_STRING = 1, DATA_TYPE_FLOAT64 = 3, STATUS_SUCCESS = 1 };
  pb exp = {0}, data = {0};
  for (size_t i = 0; i < n; i++) {
    if (h[i].kind == FSLG_NONE) continue;
    pb info = {0};
    pb_str(&info, 1, h[i].name);
    pb_key(&info, 4, WIRE_VARINT);
    pb_varint(&info, h[i].kind == FSLG_STRING ? DATA_TYPE_STRING : DATA_TYPE_FLOAT64);
    pb_msg(&exp, 4, &info);
  }
  for (size_t i = 0; i < nmetrics; i++) {
    pb name = {0}, info = {0};
    pb_str(&name, 2, metrics[i]);
    pb_msg(&info, 1, &name);
    pb_msg(&exp, 5, &info);
  }
  pb_msg(&data, 2, &exp);
  if (plugin_event(ev, "_hparams_/experiment", &data, step, err) < 0) return -1;
  /* session_start_info 3 { hparams 1: map entries { key 1, value 2: google.protobuf.Value
   * { number_value 2 | string_value 3 } } } */
  pb ssi = {0};
  for (size_t i = 0; i < n; i++) {
    if (h[i].kind == FSLG_NONE) continue;
    pb val = {0}, entry = {0};
    if (h[i].kind == FSLG_STRING) pb_str(&val, 3, h[i].text);
    else pb_double(&val, 2, h[i].value);
    pb_str(&entry, 1, h[i].name);
    pb_msg(&entry, 2, &val);
    pb_msg(&ssi, 1, &entry);
  }
  pb_msg(&data, 3, &ssi);
  if (plugin_event(ev, "_hparams_/session_start_info", &data, step, err) < 0) return -1;
  pb sei = {0}; /* session_end_info 4 { status 1: STATUS_SUCCESS } */
  pb_key(&sei, 1, WIRE_VARINT);
  pb_varint(&sei, STATUS_SUCCESS);
  pb_msg(&data, 4, &sei);
  return plugin_event(ev, "_hparams_/session_end_info", &data, step, err);
}
