// The bundle's start: every program in the bundle's bin/ is a link to this one small static
// program, which runs the real program (libexec/NAME) under the bundle's own loader and
// libraries (lib/). So a program runs in any x86-64 Linux image, whatever its libc and its
// version, or with none at all, from whatever folder the bundle was copied to.
//
// Why a static start and not a shell script: it needs no /bin/sh, costs one exec and no
// fork, and passes the arguments through untouched. Why the loader is called by hand and not
// named in each program's PT_INTERP: PT_INTERP must be an absolute path, and the bundle
// lives wherever it was copied. `--library-path` applies to this process only, so the
// image's programs that ours start (mpirun, sh, the user's ranks) never see our libraries.
//
// Which program: the name the caller executed (AT_EXECFN: the path given to execve, the link
// in bin/), not argv[0], which callers may set to anything. Where the bundle is: the real
// path of that link (this file, in libexec/), one folder up. Neither needs /proc.
//
// nccl-check is the one program that loads the image's own libraries (its MPI, NCCL and
// CUDA), and it comes in one build per MPI ABI: nccl-check for Open MPI's libmpi.so.40
// (Open MPI 4 and 5, HPC-X), nccl-check.mpich for MPICH's libmpi.so.12 (MPICH, Intel MPI).
// `nccl-check` runs the first build whose libraries the image has. And two C libraries
// cannot share a process, so it runs under whichever of the two loaders has the newer C
// library: the image's loader is tried first, then the bundle's (the image's libraries were
// built for an older C library, which the newer one keeps serving). Each try is the loader's
// `--list`, which resolves every library and symbol version and runs nothing.
//
// The program's own path in bin/ becomes its argv[0], so that it finds its siblings there
// (common/self_path.h): under a loader called by hand, /proc/self/exe names the loader.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <unistd.h>

static const char kImageLoader[] = "/lib64/ld-linux-x86-64.so.2";

static void fail(const char* what, const char* path) {
  // The key of docs/troubleshooting.md (launcher/trouble_keys.h): a broken bundle's symptom.
  fprintf(stderr, "trainer-mpi bundle: %s %s: %s (see docs/troubleshooting.md#bundle-missing)\n", what, path,
          strerror(errno));
  _exit(127);
}

// joined(OUT, A, B): A "/" B into OUT (PATH_MAX bytes), or the process ends naming A.
static void joined(char* out, const char* a, const char* b) {
  int n = snprintf(out, PATH_MAX, "%s/%s", a, b);
  if (n < 0 || n >= PATH_MAX) {
    errno = ENAMETOOLONG;
    fail("path too long under", a);
  }
}

// LOADER resolves PROGRAM with LIBS: every library and symbol version found.
static int loader_fits(const char* loader, const char* libs, const char* program) {
  if (access(loader, X_OK) != 0) return 0;
  pid_t child = fork();
  if (child < 0) return 0;
  if (child == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    } else {  // a root without /dev: the loader's complaints about a try go nowhere either
      close(1);
      close(2);
    }
    execl(loader, loader, "--library-path", libs, "--list", program, (char*)NULL);
    _exit(127);
  }
  int status = 0;
  pid_t waited;
  while ((waited = waitpid(child, &status, 0)) < 0 && errno == EINTR) {
  }
  // Not waited for (a caller that ignores SIGCHLD has its children reaped for it): no answer,
  // so this try does not count as a fit.
  return waited == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// FOLDERS, then the image's LD_LIBRARY_PATH where it has one (a new string, kept to the exec).
static const char* with_image_path(const char* folders) {
  const char* image = getenv("LD_LIBRARY_PATH");
  if (image == NULL || image[0] == '\0') return folders;
  size_t size = strlen(folders) + strlen(image) + 2;
  char* joined_path = malloc(size);
  if (joined_path == NULL) return folders;
  snprintf(joined_path, size, "%s:%s", folders, image);
  return joined_path;
}

int main(int argc, char** argv) {
  const char* called = (const char*)getauxval(AT_EXECFN);
  if (called == NULL || called[0] == '\0') called = argv[0];
  const char* slash = strrchr(called, '/');
  const char* name = slash != NULL ? slash + 1 : called;

  char start[PATH_MAX];
  if (realpath(called, start) == NULL) fail("cannot find its own file", called);
  char* cut = strrchr(start, '/');  // .../libexec/start -> .../libexec
  if (cut != NULL) *cut = '\0';
  cut = strrchr(start, '/');  // -> the bundle's folder
  if (cut != NULL) *cut = '\0';
  const char* root = start[0] != '\0' ? start : "/";

  char libexec[PATH_MAX], program[PATH_MAX], bin[PATH_MAX], self[PATH_MAX];
  char libs[PATH_MAX], glibc_libs[PATH_MAX], loader[PATH_MAX], both[2 * PATH_MAX + 1];
  joined(libexec, root, "libexec");
  joined(program, libexec, name);
  joined(bin, root, "bin");
  joined(self, bin, name);
  joined(libs, root, "lib");
  joined(glibc_libs, libs, "glibc");
  joined(loader, glibc_libs, "ld-linux-x86-64.so.2");
  if (strcmp(name, "start") == 0 || access(program, X_OK) != 0) {
    fprintf(stderr,
            "trainer-mpi bundle: no program '%s' in %s: run one of %s/ (see "
            "docs/troubleshooting.md#bundle-missing)\n",
            name, libexec, bin);
    return 127;
  }
  snprintf(both, sizeof both, "%s:%s", glibc_libs, libs);

  const char* chosen_loader = loader;
  const char* chosen_libs = both;
  if (strcmp(name, "nccl-check") == 0 || strcmp(name, "nccl-check.mpich") == 0) {
    // The builds to try, in order, and the (loader, libraries) pairs to try each with.
    // The image's own LD_LIBRARY_PATH after the bundle's folders: `--library-path` replaces
    // it, and an image may find its MPI only there (HPC-X's, under /opt/hpcx).
    const char* builds[2] = {name, strcmp(name, "nccl-check") == 0 ? "nccl-check.mpich" : NULL};
    const char* loaders[2] = {kImageLoader, loader};
    const char* loader_libs[2] = {with_image_path(libs), with_image_path(both)};
    int found = 0;
    for (int b = 0; b < 2 && builds[b] != NULL && !found; b++) {
      char candidate[PATH_MAX];
      joined(candidate, libexec, builds[b]);
      for (int l = 0; l < 2 && !found; l++) {
        if (access(candidate, X_OK) == 0 && loader_fits(loaders[l], loader_libs[l], candidate)) {
          memcpy(program, candidate, sizeof candidate);
          chosen_loader = loaders[l];
          chosen_libs = loader_libs[l];
          found = 1;
        }
      }
    }
    // None fits: the first build under the bundle's loader, which names what is missing.
  }
  char** args = calloc((size_t)argc + 6, sizeof *args);
  if (args == NULL) fail("out of memory for", name);
  args[0] = (char*)chosen_loader;
  args[1] = "--library-path";
  args[2] = (char*)chosen_libs;
  args[3] = "--argv0";
  args[4] = self;
  args[5] = program;
  for (int i = 1; i < argc; i++) args[5 + i] = argv[i];
  execv(chosen_loader, args);
  fail("cannot run the loader", chosen_loader);
  return 127;
}
