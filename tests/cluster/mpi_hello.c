/* mpi_hello: the smallest real MPI job. Every rank prints "rank R/N on HOST", then all
 * ranks all-reduce their rank numbers, and rank 0 checks the sum, so a test sees both where
 * each rank ran and that the ranks really talked to each other. Exits 1 on a wrong sum. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  printf("rank %d/%d on %s\n", rank, size, host);
  fflush(stdout);
  long mine = rank, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  int ok = sum == (long)size * (size - 1) / 2;
  if (rank == 0) printf("allreduce sum %ld over %d ranks: %s\n", sum, size, ok ? "ok" : "WRONG");
  MPI_Finalize();
  return ok ? 0 : 1;
}
