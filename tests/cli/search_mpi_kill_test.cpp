// A worker killed with SIGKILL under mpirun (issue 20 item 6): the job ends, non-zero, with
// rank 0 saying what happened to the search and mpirun naming the dead rank; no hang.
// Open MPI (Debian 12) aborts the whole job itself; rank 0's SIGTERM handler
// (cli/search_mpi.cpp) prints the message. Skipped without mpirun.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "support/support.hpp"

namespace {

TEST(SearchMpiKill, AKilledWorkerEndsTheJobWithAClearMessage) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
  bmpipe::test::ScratchDir dir;
  const std::string tag = dir.file("tag.csv");  // unique: finds this job's processes only
  // The search runs in the background; rank 2 is found by its OMPI_COMM_WORLD_RANK, given
  // 1.5 s to be serving (past MPI_Init and the config), then killed with SIGKILL. The
  // Mixtral space (tp 1, 2, every pp and ep) plans for many seconds, so the kill lands
  // mid-search; `timeout` turns a hang into exit 124.
  const std::string script =
      "( timeout 120 mpirun -np 3 --oversubscribe --allow-run-as-root " +
      std::string(BMPIPE_BINARY) + " search " + bmpipe::test::examples() +
      "h100_mixtral_8x7b_ep8.yaml --quiet --tp 1,2 --micro-batch-size 1 --csv '" + tag +
      "' >'" + dir.file("out") + "' 2>'" + dir.file("err") + "'; echo $? >'" + dir.file("rc") +
      "' ) &\n"
      "found=\n"
      "for i in $(seq 1 600); do\n"
      "  for p in $(pgrep -f -- '" + tag + "'); do\n"
      "    if tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=2;"
      " then sleep 1.5; kill -9 $p && found=1; fi\n"
      "  done\n"
      "  [ -n \"$found\" ] && break\n"
      "  sleep 0.1\n"
      "done\n"
      "wait\n"
      "[ -n \"$found\" ]\n";
  bmpipe::test::write_file(dir.file("kill.sh"), script);
  ASSERT_EQ(std::system(("bash '" + dir.file("kill.sh") + "'").c_str()), 0)
      << "no worker to kill";
  const int rc = std::atoi(bmpipe::test::slurp(dir.file("rc")).c_str());
  const std::string err = bmpipe::test::slurp(dir.file("err"));
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, 124) << "the job hung: " << err;
  EXPECT_NE(err.find("bmpipe search: stopped by mpirun"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 2"), std::string::npos) << err;
}

}  // namespace
