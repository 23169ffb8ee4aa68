// The watchdog's messages between ranks, over a communicator of their own
// (a duplicate of the world, so they never meet the training's traffic):
// a rank whose wait outlived parallel.timeout asks the operation's members
// where they stand, names those that never reached it, tells every rank it
// is giving up (each that still can prints the operation it waits on), and
// aborts the job with kExitRestartable. Ranks answer while they wait in a
// collective or a message; a rank that is stopped, hung elsewhere or cut
// off does not answer, and is named for that.
#pragma once

namespace llm {

// Duplicates the world communicator and plugs the handlers into
// collectives/watchdog.h; called once, right after MPI_Init.
void watchdog_mpi_install();

}  // namespace llm
