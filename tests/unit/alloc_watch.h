// A watch on the allocator, for the fork-safety tests (spawn_test.cpp): while it is on, a
// process forked from the watching one that allocates ends at once with kAllocatedInChild.
// A child that allocates between fork() and exec() can hang forever when its parent has
// threads (common/exec_plan.h); that hang is rare, this exit is certain.
//
// Under AddressSanitizer the watch is its malloc hook; in other builds this test binary
// stands in for glibc's malloc family (each forwards to glibc's own, __libc_malloc …).
#pragma once

namespace tmpi::test {

inline constexpr int kAllocatedInChild = 99;

// Until the watch is dropped, an allocation in any process but this one _exits 99.
class AllocWatch {
 public:
  AllocWatch();
  ~AllocWatch();
  AllocWatch(const AllocWatch&) = delete;
  AllocWatch& operator=(const AllocWatch&) = delete;
};

}  // namespace tmpi::test
