// See alloc_watch.h. Every allocation asks one relaxed atomic whether a watch is on; only
// then does it ask the kernel which process it is in.
#include "alloc_watch.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

namespace {

std::atomic<pid_t> watching_from{0};  // the watching process; 0: no watch

void note_allocation() {
  pid_t watcher = watching_from.load(std::memory_order_relaxed);
  if (watcher != 0 && ::getpid() != watcher) ::_exit(tmpi::test::kAllocatedInChild);
}

}  // namespace

namespace tmpi::test {

AllocWatch::AllocWatch() {
  watching_from.store(::getpid());
}

AllocWatch::~AllocWatch() {
  watching_from.store(0);
}

}  // namespace tmpi::test

#if defined(__SANITIZE_ADDRESS__)
#define TMPI_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TMPI_TEST_ASAN 1
#endif
#endif

#ifdef TMPI_TEST_ASAN
// The sanitizer's own hook (sanitizer/allocator_interface.h, which gcc 12 does not ship).
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*on_malloc)(const volatile void*, std::size_t),
                                                         void (*on_free)(const volatile void*));
namespace {
void on_malloc(const volatile void* /*ptr*/, std::size_t /*size*/) {
  note_allocation();
}
void on_free(const volatile void* /*ptr*/) {}
// The sanitizer takes both hooks or none.
[[maybe_unused]] const int hooks_installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}  // namespace
#else
// glibc's malloc family, each forwarded to glibc's own entry point; the executable's
// definitions come first in symbol lookup, for libc's own calls too (setenv, strdup, …).
extern "C" {
void* __libc_malloc(std::size_t size);
void* __libc_calloc(std::size_t count, std::size_t size);
void* __libc_realloc(void* ptr, std::size_t size);
void* __libc_memalign(std::size_t alignment, std::size_t size);
void __libc_free(void* ptr);

void* malloc(std::size_t size) {
  note_allocation();
  return __libc_malloc(size);
}
void* calloc(std::size_t count, std::size_t size) {
  note_allocation();
  return __libc_calloc(count, size);
}
void* realloc(void* ptr, std::size_t size) {
  note_allocation();
  return __libc_realloc(ptr, size);
}
void* memalign(std::size_t alignment, std::size_t size) {
  note_allocation();
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(std::size_t alignment, std::size_t size) {
  note_allocation();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t size) {
  note_allocation();
  void* ptr = __libc_memalign(alignment, size);
  if (ptr == nullptr) return ENOMEM;
  *out = ptr;
  return 0;
}
void free(void* ptr) {
  __libc_free(ptr);
}
}
#endif
