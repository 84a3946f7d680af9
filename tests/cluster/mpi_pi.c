/* mpi_pi: the program of mpi-operator's pi example, written anew for the converted MPIJob's
 * run (examples_test.sh pi): every rank integrates 4/(1+x^2) over its share of [0, 1] by the
 * midpoint rule, rank 0 sums the shares with MPI_Reduce and prints the estimate and its
 * error. Each rank also says where it ran, so the test sees the ranks spread over the hosts.
 * Exits 1 when the estimate is off, which a wrong reduction would make it. */
#include <math.h>
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
  printf("pi worker %d of %d on %s\n", rank, size, host);
  fflush(stdout);
  const long steps = 10 * 1000 * 1000;
  const double width = 1.0 / (double)steps;
  double share = 0.0;
  for (long i = rank; i < steps; i += size) {
    double x = ((double)i + 0.5) * width;
    share += 4.0 / (1.0 + x * x);
  }
  share *= width;
  double pi = 0.0;
  MPI_Reduce(&share, &pi, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  int ok = 1;
  if (rank == 0) {
    double error = fabs(pi - 3.14159265358979323846);
    ok = error < 1e-9;
    printf("pi is approximately %.12f, error %.3e: %s\n", pi, error, ok ? "ok" : "WRONG");
    fflush(stdout);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return ok ? 0 : 1;
}
