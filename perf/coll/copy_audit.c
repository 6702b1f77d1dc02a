/*
 * copy_audit.c - LD_PRELOAD shim that counts the bytes a process copies
 * with memcpy/memmove (calls of >= 4 KiB, from any library, UCX included)
 * and moves with process_vm_readv/writev (UCX's cma single-copy
 * rendezvous), and prints the totals at exit. It is how the zero-copy claim
 * is checked: a 64 MB allreduce whose data crosses by cma with no staging
 * copies shows ~0 bytes of large memcpy. See verify_zero_copy.sh.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define AUDIT_MIN_BYTES 4096

static unsigned long long audit_copy_bytes, audit_copy_calls;
static unsigned long long audit_cma_bytes, audit_cma_calls;

typedef void *(*memcpy_fn_t)(void *, const void *, size_t);
typedef ssize_t (*vm_fn_t)(pid_t, const struct iovec *, unsigned long,
                           const struct iovec *, unsigned long, unsigned long);

static void audit_count(size_t n)
{
    if (n >= AUDIT_MIN_BYTES) {
        audit_copy_bytes += n;
        ++audit_copy_calls;
    }
}

/* byte loops: cannot call the real memcpy before dlsym has resolved it */
void *memcpy(void *dst, const void *src, size_t n)
{
    static memcpy_fn_t real;
    if (real == NULL) {
        real = (memcpy_fn_t)dlsym(RTLD_NEXT, "memcpy");
    }
    audit_count(n);
    return real(dst, src, n);
}

void *memmove(void *dst, const void *src, size_t n)
{
    static memcpy_fn_t real;
    if (real == NULL) {
        real = (memcpy_fn_t)dlsym(RTLD_NEXT, "memmove");
    }
    audit_count(n);
    return real(dst, src, n);
}

static ssize_t audit_vm(const char *name, pid_t pid, const struct iovec *l,
                        unsigned long ln, const struct iovec *r,
                        unsigned long rn, unsigned long flags)
{
    vm_fn_t real = (vm_fn_t)dlsym(RTLD_NEXT, name);
    ssize_t n    = real(pid, l, ln, r, rn, flags);
    if (n > 0) {
        audit_cma_bytes += (unsigned long long)n;
        ++audit_cma_calls;
    }
    return n;
}

ssize_t process_vm_readv(pid_t pid, const struct iovec *l, unsigned long ln,
                         const struct iovec *r, unsigned long rn,
                         unsigned long flags)
{
    return audit_vm("process_vm_readv", pid, l, ln, r, rn, flags);
}

ssize_t process_vm_writev(pid_t pid, const struct iovec *l, unsigned long ln,
                          const struct iovec *r, unsigned long rn,
                          unsigned long flags)
{
    return audit_vm("process_vm_writev", pid, l, ln, r, rn, flags);
}

__attribute__((destructor)) static void audit_report(void)
{
    fprintf(stderr,
            "copy-audit pid %d: memcpy/memmove >= %d B: %llu calls, %llu "
            "bytes; cma (process_vm_*): %llu calls, %llu bytes\n",
            (int)getpid(), AUDIT_MIN_BYTES, audit_copy_calls,
            audit_copy_bytes, audit_cma_calls, audit_cma_bytes);
}
