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
/* Fabric's pair of checkpoint-state raises each sharding strategy has its
 * own copy of (FSDP, DeepSpeed: R61/R62 and R65; ModelParallel: R96/R104;
 * XLAFSDP: R111/R112), for the k models of the state that the strategy
 * shards: none -> none_id, "Could not find a <kind> model in the provided
 * checkpoint state. ..."; several -> many_id (help FSF_H_ONE) with
 * many_fmt, whose conversions read "Saving"/"Loading", "save"/"load",
 * "save"/"load" in that order (a text may use none).  saving: save (1) or
 * load (0).  -1 with the issue, else 0. */
int fsF_state_models(int k, int saving, const char *none_id, const char *none_help, const char *kind,
                     const char *many_id, const char *many_fmt, fsF_issues *iss)
    __attribute__((format(printf, 7, 0)));

#endif
