/* launch.h -- starting the ranks of a run, or joining ranks started outside.
 *
 * Under torchrun, SLURM (srun) or any launcher that sets the torchrun
 * variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK,
 * MASTER_ADDR, MASTER_PORT), this process is one rank: fsLN_launch reads them
 * and returns.  Otherwise fsLN_launch forks `devices` ranks on this host, with
 * the environment torchrun would give them, and the calling process becomes
 * their supervisor: it does no work of its own, relays the ranks' output
 * (rank 0's untouched, the others' stdout and stderr lines prefixed with
 * "[rank N] "), and ends every rank as soon as one fails.  Forking after the
 * script's setup has run gives each rank what Fabric's launcher gives by
 * re-running the script: the script is deterministic and hermetic.  Fork
 * before starting any thread (a BLAS thread pool, CUDA): a child keeps only
 * the thread that forked.  docs/distributed.md has the whole design. */
#ifndef FS_LAUNCH_H
#define FS_LAUNCH_H

#include <stdbool.h>
#include "comm.h"

typedef struct fsLN_env {
  int rank, world_size;             /* global */
  int local_rank, local_world_size; /* on this host */
  int node_rank;
  char master_addr[256];
  int master_port;
  bool spawned;     /* forked by fsLN_launch (false: joined an outside launcher) */
  int listen_fd;    /* a spawned rank 0: the rendezvous socket, else -1 */
} fsLN_env;

typedef enum fsLN_role { FSLN_ERROR = -1, FSLN_RANK, FSLN_SUPERVISOR } fsLN_role;

/* Reads the launcher's variables: 1 and *env filled when this process was
 * started as a rank, 0 when not, -1 when they are malformed (fsT_error). */
int fsLN_detect(fsLN_env *env);

/* Without an outside launcher: the environment fsLN_launch forks the ranks
 * with, rank 0's.  One node: loopback, port 0 (the kernel picks).  Several,
 * as Lightning's LightningEnvironment reads them: NODE_RANK (else
 * GROUP_RANK, else 0), MASTER_ADDR (default 127.0.0.1) and MASTER_PORT,
 * which every node's launcher must be given.  -1 (fsT_error) when they are
 * missing or malformed. */
int fsLN_node_env(int devices, int num_nodes, fsLN_env *env);

/* With num_nodes > 1 and no outside launcher, this is one node of several,
 * started as Lightning's default environment starts them: the same script
 * on every node with NODE_RANK (else GROUP_RANK) = 0..num_nodes-1 and the
 * same MASTER_ADDR (default 127.0.0.1) and MASTER_PORT; each forks its
 * `devices` ranks, global ranks node_rank * devices + local rank, and node
 * 0 listens for the rendezvous.
 * FSLN_RANK: this process is rank env->rank; it runs the script and exits
 * with the script's status (a single device, or an outside launcher: no fork).
 * FSLN_SUPERVISOR: the ranks have ended; *status is the process's exit
 * status: 0 when every rank exited 0; 1 when the first rank found failed exited
 * with 1 (a script error, which that rank reported); 3 when it died of a
 * signal or exited with another status.  On failure fsT_error() names the
 * rank and how it ended, and no rank process is left behind.
 * FSLN_ERROR: nothing was started (fsT_error). */
fsLN_role fsLN_launch(int devices, int num_nodes, fsLN_env *env, int *status);

/* on: the ranks' standard error is a machine's channel of JSON lines (the
 * diagnostics' JSON format): a line from rank r that is a JSON object is
 * relayed as it is (its "rank" says whose), any other line becomes a JSON
 * note with "rank"; off (the default): every line gets "[rank r] ". */
void fsLN_json_stderr(bool on);

/* A rank's communicator: the rendezvous at MASTER_ADDR:MASTER_PORT, then the
 * transport (shm needs every rank on this host).  cfg gives the timeout and
 * staging; rank, world and local rank come from env.  Uses env->listen_fd
 * once. */
fsCC_comm *fsLN_connect(fsLN_env *env, fsCC_transport t, const fsCC_config *cfg);

#endif
