// The plan of nccl-check, the same for both backends: the world all-reduce at every size,
// then localisation (an all-reduce within each host; a test per pair of ranks within each
// host and per pair of hosts, in rounds of disjoint pairs; a second look at every slow
// pair; a retest of each suspect host beside a known good peer), then the verdict
// (verdict.h). Each step has its own deadline (--step-timeout); every rank computes the
// same verdict from the same all-reduced samples (rank 0 exits with its code: see main.cpp).
#pragma once

#include "ncclcheck/fabric.h"
#include "ncclcheck/options.h"
#include "ncclcheck/report.h"

namespace tmpi::check {

// Runs on every rank. The report is the same on every rank, except after a timeout or an
// error that only this rank saw (a CUDA call that failed): then `abort` is set, and the
// caller prints the report and aborts the job, since the other ranks would wait for this
// one until their deadlines.
struct Outcome {
  Report report;
  bool abort = false;
};
Outcome run_check(const Options& options, Progress& progress);

}  // namespace tmpi::check
