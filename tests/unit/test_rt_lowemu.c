/* test_rt_lowemu.c -- emulated cuda's low-precision elementwise kernels
 * (backend_emu.c's low table: low_cuda.cu's element code, low_elem.h, run
 * on the host) against the cpu's direct paths, bit for bit, through
 * autograd.c's device dispatch and poisoned device pointers
 * (low_table_check.h).  The whole process emulates cuda. */
#include "backend.h"
#include "rt_testutil.h"
#include "low_table_check.h"

int main(void) {
  fsB_emulate_cuda();
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_low_elementwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
