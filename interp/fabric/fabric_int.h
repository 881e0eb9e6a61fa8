/* fabric_int.h -- what fabric.c (issues, reprs, states, validations) and
 * connector.c (Fabric(...)'s resolution) share.  Only fabric/ includes it. */
#ifndef FS_FABRIC_INT_H
#define FS_FABRIC_INT_H

#include "fabric.h"
#include "value.h"

/* b's text, or NULL when it could not be built (out of memory). */
char *fsF_buf_take(fsV_buf *b);
/* Adds an error (fail: returns -1) or a warning with a rule id and help. */
int fsF_fail(fsF_issues *iss, const char *rule, const char *help, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void fsF_warn(fsF_issues *iss, const char *rule, const char *help, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Per strategy class: the module Lightning defines it in; per accelerator:
 * its class name ("CUDAAccelerator"). */
extern const char *const fsF_strategy_module[FSF_CLS__COUNT];
extern const char *const fsF_accel_classes[];
/* The help of the checkpoint-state rules every strategy has (no model in
 * the state, several models): one text for FSDP, DeepSpeed, MP, XLAFSDP. */
#define FSF_H_STATE "put the set-up model in the state: `{\"model\": model, \"optimizer\": optimizer}`"
#define FSF_H_ONE "use one checkpoint (and path) per model"

#endif
