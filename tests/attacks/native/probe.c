/*
 * probe.c: the native half of the rsandbox attack corpus.
 *
 * Compiled by the runner (crates/rsandbox-cli/tests/attacks.rs) with
 *     cc -shared -fPIC -O1 -o probe.so probe.c
 * and handed to the R cases as hex ({{PROBE_HEX}}); a case writes it into its
 * workspace with writeBin(), dyn.load()s it and calls one entry point with .C().
 *
 * Every entry point has the same .C() signature:
 *     void probe_xxx(char **sarg, int *iarg, int *res)
 * sarg[0]  a string argument (a path, a socket name, a token), may be ""
 * iarg[0]  an integer argument (a port, a count), may be 0
 * res[0]   0 when the attack SUCCEEDED (the call did what an attacker wants),
 *          otherwise the errno that stopped it (or -1 when no errno applies).
 *
 * A probe that the kernel should refuse outright always makes its system call,
 * even when a preparation step failed, so seccomp sees it. Each probe prints one
 * line on fd 1 ("probe xxx: ...") describing what happened.
 *
 * No R headers: plain libc, so the same .so works with any R.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <net/if.h>
#include <linux/seccomp.h>
#include <linux/sockios.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof buf - 2) n = sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(1, buf, (size_t)n);
    (void)w;
}

/* Record a system call's result: 0 on success, errno otherwise. */
static int outcome(const char *what, long rc) {
    if (rc >= 0) {
        say("probe %s: succeeded (rc %ld)", what, rc);
        return 0;
    }
    int e = errno;
    say("probe %s: failed: %s (errno %d)", what, strerror(e), e);
    return e ? e : -1;
}

/* ------------------------------------------------------------------ */
/* Kernel attack surface                                               */
/* ------------------------------------------------------------------ */

void probe_ptrace_parent(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    pid_t target = getppid();
    long rc = ptrace(PTRACE_ATTACH, target, 0, 0);
    *res = outcome("ptrace(PTRACE_ATTACH, parent)", rc);
    if (rc == 0) {
        waitpid(target, NULL, __WALL);
        ptrace(PTRACE_DETACH, target, 0, 0);
    }
}

void probe_ptrace_traceme(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    long rc = ptrace(PTRACE_TRACEME, 0, 0, 0);
    *res = outcome("ptrace(PTRACE_TRACEME)", rc);
}

void probe_process_vm_readv(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* Read another process's memory: a forked child of ours, which has our layout
     * (unsandboxed this works for root; in the sandbox the call itself is refused). */
    static char remote_probe[16] = "remote-memory";
    char local[16] = {0};
    pid_t pid = fork();
    if (pid == 0) {
        for (;;) pause();
    }
    struct iovec l = {local, sizeof local}, r = {remote_probe, sizeof remote_probe};
    long rc = syscall(SYS_process_vm_readv, pid > 0 ? pid : getppid(), &l, 1, &r, 1, 0);
    *res = outcome("process_vm_readv(other process)", rc);
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

void probe_keyctl(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    long rc = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
    *res = outcome("keyctl(KEYCTL_GET_KEYRING_ID)", rc);
}

void probe_add_key(char **sarg, int *iarg, int *res) {
    (void)iarg;
    const char *payload = sarg && sarg[0] && sarg[0][0] ? sarg[0] : "rsandbox-attack-key";
    long rc = syscall(SYS_add_key, "user", "rsandbox-attack", payload, strlen(payload), KEY_SPEC_PROCESS_KEYRING);
    *res = outcome("add_key(user)", rc);
}

void probe_bpf(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 8;
    attr.max_entries = 1;
    long rc = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
    *res = outcome("bpf(BPF_MAP_CREATE)", rc);
    if (rc >= 0) close((int)rc);
}

void probe_io_uring(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    unsigned char params[120]; /* struct io_uring_params */
    memset(params, 0, sizeof params);
    long rc = syscall(SYS_io_uring_setup, 4, params);
    *res = outcome("io_uring_setup", rc);
    if (rc >= 0) close((int)rc);
}

void probe_userfaultfd(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    long rc = syscall(SYS_userfaultfd, O_CLOEXEC);
    *res = outcome("userfaultfd", rc);
    if (rc >= 0) close((int)rc);
}

void probe_perf_event_open(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.size = sizeof attr;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.disabled = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    long rc = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    *res = outcome("perf_event_open", rc);
    if (rc >= 0) close((int)rc);
}

void probe_unshare_user(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    *res = outcome("unshare(CLONE_NEWUSER)", syscall(SYS_unshare, CLONE_NEWUSER));
}

void probe_unshare_net(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    *res = outcome("unshare(CLONE_NEWNET)", syscall(SYS_unshare, CLONE_NEWNET));
}

void probe_unshare_mount(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    *res = outcome("unshare(CLONE_NEWNS)", syscall(SYS_unshare, CLONE_NEWNS));
}

void probe_setns(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* Our own net namespace: harmless when it works, but setns must never be reachable. */
    int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (fd < 0) say("probe setns: open /proc/self/ns/net failed (%s); calling setns anyway", strerror(errno));
    long rc = syscall(SYS_setns, fd < 0 ? 0 : fd, 0);
    *res = outcome("setns", rc);
    if (fd >= 0) close(fd);
}

static int clone_flags(const char *what, unsigned long flags, int *res) {
    long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) _exit(0);
    *res = outcome(what, pid);
    if (pid > 0) waitpid((pid_t)pid, NULL, 0);
    return 0;
}

void probe_clone_newuser(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    clone_flags("clone(CLONE_NEWUSER)", CLONE_NEWUSER, res);
}

void probe_clone_newpid(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    clone_flags("clone(CLONE_NEWPID)", CLONE_NEWPID, res);
}

void probe_clone_newnet(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    clone_flags("clone(CLONE_NEWNET)", CLONE_NEWNET, res);
}

void probe_clone_parent(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* The new process is the caller's sibling: a child of the caller's parent (the
     * zygote in a sandbox), out of reach of the supervisor's look at the sandbox's
     * children. Not ours to wait for. */
    long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) _exit(0);
    *res = outcome("clone(CLONE_PARENT)", pid);
}

void probe_tiocsti(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* A pty of our own when we can open one (unsandboxed), else our stdin. */
    int fd = 0;
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0) {
        char *name = ptsname(master);
        int slave = name ? open(name, O_RDWR | O_NOCTTY) : -1;
        if (slave >= 0) fd = slave;
    } else {
        say("probe tiocsti: no pty (%s); using fd 0", strerror(errno));
    }
    char c = '#';
    long rc = ioctl(fd, TIOCSTI, &c);
    *res = outcome("ioctl(TIOCSTI)", rc);
}

void probe_tioclinux(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    char sub = 12; /* TIOCL_GETKMSGREDIRECT: harmless subcommand */
    long rc = ioctl(0, TIOCLINUX, &sub);
    *res = outcome("ioctl(TIOCLINUX)", rc);
}

void probe_open_kmsg(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
    *res = outcome("open(/dev/kmsg)", fd);
    if (fd >= 0) {
        char buf[256];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        if (n > 0) say("probe kmsg: read %zd bytes of the kernel log", n);
        close(fd);
    }
}

void probe_syslog(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    char buf[128];
    /* SYSLOG_ACTION_READ_ALL = 3 */
    *res = outcome("syslog(READ_ALL)", syscall(SYS_syslog, 3, buf, (int)sizeof buf));
}

void probe_setuid0(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    long rc = syscall(SYS_setuid, 0);
    if (rc == 0 && getuid() != 0) {
        say("probe setuid(0): returned 0 but uid is %d", (int)getuid());
        *res = -1;
        return;
    }
    *res = outcome("setuid(0)", rc);
}

void probe_setresuid0(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    long rc = syscall(SYS_setresuid, 0, 0, 0);
    if (rc == 0 && geteuid() != 0) {
        *res = -1;
        return;
    }
    *res = outcome("setresuid(0,0,0)", rc);
}

void probe_capset(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* Raise every permitted capability into the effective set (and the inheritable
     * one): a no-op for a process that has none, full power for one that kept any. */
    struct { uint32_t version; int pid; } hdr = {0x20080522, 0};
    struct { uint32_t effective, permitted, inheritable; } data[2];
    memset(data, 0, sizeof data);
    long rc = syscall(SYS_capget, &hdr, data);
    if (rc == 0) {
        for (int i = 0; i < 2; i++) data[i].effective = data[i].permitted;
        say("probe capset: permitted %08x%08x", data[1].permitted, data[0].permitted);
        if (data[0].permitted == 0 && data[1].permitted == 0) {
            say("probe capset: no capability to raise");
            *res = -1;
            return;
        }
    }
    *res = outcome("capset(effective = permitted)", syscall(SYS_capset, &hdr, data));
}

void probe_mount_tmpfs(char **sarg, int *iarg, int *res) {
    (void)iarg;
    const char *dir = sarg && sarg[0] && sarg[0][0] ? sarg[0] : ".";
    *res = outcome("mount(tmpfs)", syscall(SYS_mount, "none", dir, "tmpfs", 0, ""));
    if (*res == 0) umount2(dir, MNT_DETACH);
}

void probe_chroot(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    int root = open("/", O_RDONLY | O_DIRECTORY);
    *res = outcome("chroot(.)", syscall(SYS_chroot, "."));
    if (*res == 0 && root >= 0) {
        /* The classic escape, used here to undo the chroot when it worked. */
        if (fchdir(root) == 0) {
            long rc = syscall(SYS_chroot, ".");
            (void)rc;
        }
    }
    if (root >= 0) close(root);
}

void probe_personality(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* READ_IMPLIES_EXEC | ADDR_NO_RANDOMIZE: weaken our own exploit mitigations. */
    long rc = syscall(SYS_personality, 0x0400000 | 0x0040000);
    *res = outcome("personality(ADDR_NO_RANDOMIZE)", rc);
}

void probe_open_by_handle_at(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* The classic container escape ("shocker"): open an inode by handle. */
    struct { unsigned int handle_bytes; int handle_type; unsigned char f_handle[8]; } h;
    memset(&h, 0, sizeof h);
    h.handle_bytes = 8;
    h.handle_type = 1;
    h.f_handle[0] = 2; /* inode 2: the root directory of most file systems */
    long rc = syscall(SYS_open_by_handle_at, AT_FDCWD, &h, O_RDONLY);
    *res = outcome("open_by_handle_at", rc);
    if (rc >= 0) close((int)rc);
}

void probe_pidfd_getfd(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    long pidfd = syscall(SYS_pidfd_open, getppid(), 0);
    if (pidfd < 0) say("probe pidfd_getfd: pidfd_open(parent) failed (%s); calling pidfd_getfd anyway", strerror(errno));
    long rc = syscall(SYS_pidfd_getfd, pidfd < 0 ? 0 : pidfd, 1, 0);
    *res = outcome("pidfd_getfd(parent, 1)", rc);
}

void probe_kcmp(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* KCMP_FILE = 0 */
    *res = outcome("kcmp(self, parent)", syscall(SYS_kcmp, getpid(), getppid(), 0, 0, 0));
}

void probe_seccomp_filter(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* Installing a filter of our own (here: allow everything) must be refused. */
    struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, 0x7fff0000U)};
    struct sock_fprog prog = {1, allow};
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    *res = outcome("seccomp(SET_MODE_FILTER)", syscall(SYS_seccomp, 1, 0, &prog));
}

/* ------------------------------------------------------------------ */
/* Running programs                                                    */
/* ------------------------------------------------------------------ */

void probe_fork_execve(char **sarg, int *iarg, int *res) {
    (void)iarg;
    const char *word = sarg && sarg[0] && sarg[0][0] ? sarg[0] : "ATTACK-SUCCEEDED";
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {"echo", (char *)word, NULL};
        char *envp[] = {NULL};
        execve("/bin/echo", argv, envp);
        _exit(127);
    }
    if (pid < 0) {
        *res = outcome("fork", -1);
        return;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        say("probe fork+execve: the program ran");
        *res = 0;
    } else {
        say("probe fork+execve: child status %d", status);
        *res = -1;
    }
}

void probe_execve_self(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* Replace the R process itself with a shell: no fork. */
    char *argv[] = {"echo", "ATTACK-SUCCEEDED", NULL};
    char *envp[] = {NULL};
    long rc = execve("/bin/echo", argv, envp);
    *res = outcome("execve(/bin/echo)", rc);
}

void probe_memfd_fexecve(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    int mfd = (int)syscall(SYS_memfd_create, "payload", 0);
    if (mfd < 0) {
        /* memfd refused: the same exec from a file of our own, so the exec itself is
         * still attempted (and seen). */
        outcome("memfd_create", -1);
        mfd = open("payload", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
    }
    int src = open("/bin/echo", O_RDONLY);
    if (src >= 0) {
        char buf[65536];
        ssize_t n;
        while ((n = read(src, buf, sizeof buf)) > 0) {
            if (write(mfd, buf, (size_t)n) != n) break;
        }
        close(src);
    } else {
        say("probe memfd: cannot read /bin/echo (%s)", strerror(errno));
    }
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {"echo", "ATTACK-SUCCEEDED", NULL};
        char *envp[] = {NULL};
        fexecve(mfd, argv, envp);
        _exit(127);
    }
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        say("probe memfd_create+fexecve: the program ran");
        *res = 0;
    } else {
        say("probe memfd_create+fexecve: child status %d", status);
        *res = -1;
    }
}

void probe_execveat(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    char *argv[] = {"echo", "ATTACK-SUCCEEDED", NULL};
    char *envp[] = {NULL};
    pid_t pid = fork();
    if (pid == 0) {
        syscall(SYS_execveat, AT_FDCWD, "/bin/echo", argv, envp, 0);
        _exit(127);
    }
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    *res = (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) ? 0 : -1;
    say("probe execveat: child status %d", status);
}

/* ------------------------------------------------------------------ */
/* Network                                                             */
/* ------------------------------------------------------------------ */

static int send_all(int fd, const char *msg) {
    size_t len = strlen(msg);
    return send(fd, msg, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

void probe_tcp_connect(char **sarg, int *iarg, int *res) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        *res = outcome("socket(AF_INET, SOCK_STREAM)", -1);
        return;
    }
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)*iarg);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    long rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    if (rc == 0) rc = send_all(fd, sarg[0]);
    *res = outcome("tcp connect+send 127.0.0.1", rc);
    close(fd);
}

void probe_udp_sendto(char **sarg, int *iarg, int *res) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        *res = outcome("socket(AF_INET, SOCK_DGRAM)", -1);
        return;
    }
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)*iarg);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    long rc = sendto(fd, sarg[0], strlen(sarg[0]), 0, (struct sockaddr *)&a, sizeof a);
    *res = outcome("udp sendto 127.0.0.1", rc);
    close(fd);
}

static void unix_connect(const char *what, const char *name, int abstract, int *res) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
        *res = outcome("socket(AF_UNIX)", -1);
        return;
    }
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t len = strlen(name);
    if (len > sizeof a.sun_path - 2) len = sizeof a.sun_path - 2;
    socklen_t alen;
    if (abstract) {
        memcpy(a.sun_path + 1, name, len);
        alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
    } else {
        memcpy(a.sun_path, name, len);
        alen = (socklen_t)sizeof a;
    }
    long rc = connect(fd, (struct sockaddr *)&a, alen);
    if (rc == 0) rc = send_all(fd, "ATTACK-SUCCEEDED via unix socket\n");
    *res = outcome(what, rc);
    close(fd);
}

void probe_unix_connect(char **sarg, int *iarg, int *res) {
    (void)iarg;
    unix_connect("connect(unix pathname)", sarg[0], 0, res);
}

void probe_abstract_connect(char **sarg, int *iarg, int *res) {
    (void)iarg;
    unix_connect("connect(unix abstract)", sarg[0], 1, res);
}

void probe_unix_dgram(char **sarg, int *iarg, int *res) {
    (void)iarg;
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (fd < 0) {
        *res = outcome("socket(AF_UNIX, SOCK_DGRAM)", -1);
        return;
    }
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    strncpy(a.sun_path, sarg[0], sizeof a.sun_path - 1);
    *res = outcome("sendto(unix dgram)", sendto(fd, "x", 1, 0, (struct sockaddr *)&a, sizeof a));
    close(fd);
}

void probe_raw_socket(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    int fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    *res = outcome("socket(AF_INET, SOCK_RAW, ICMP)", fd);
    if (fd >= 0) close(fd);
}

void probe_packet_socket(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    *res = outcome("socket(AF_PACKET, SOCK_RAW)", fd);
    if (fd >= 0) close(fd);
}

void probe_netlink_route(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    int fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
    if (fd < 0) {
        *res = outcome("socket(AF_NETLINK, NETLINK_ROUTE)", -1);
        return;
    }
    struct { struct nlmsghdr h; struct rtgenmsg g; } req;
    memset(&req, 0, sizeof req);
    req.h.nlmsg_len = sizeof req;
    req.h.nlmsg_type = RTM_GETLINK;
    req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.g.rtgen_family = AF_UNSPEC;
    long rc = send(fd, &req, sizeof req, 0);
    if (rc >= 0) {
        char buf[8192];
        rc = recv(fd, buf, sizeof buf, 0);
    }
    *res = outcome("netlink RTM_GETLINK dump", rc);
    close(fd);
}

void probe_socketpair(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    int sv[2];
    *res = outcome("socketpair(AF_UNIX)", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
}

/* ------------------------------------------------------------------ */
/* Signals and processes                                               */
/* ------------------------------------------------------------------ */

void probe_kill_parent(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    pid_t parent = getppid();
    say("probe kill: parent is pid %d", (int)parent);
    *res = outcome("kill(parent, SIGKILL)", kill(parent, SIGKILL));
}

void probe_kill_pid(char **sarg, int *iarg, int *res) {
    (void)sarg;
    *res = outcome("kill(pid, SIGKILL)", kill((pid_t)*iarg, SIGKILL));
}

void probe_kill_all(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* Everything this uid may signal, except ourselves. */
    *res = outcome("kill(-1, SIGKILL)", kill(-1, SIGKILL));
}

void probe_kill_pgrp_of_parent(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    pid_t pg = getpgid(getppid());
    *res = outcome("kill(-pgid(parent), SIGKILL)", pg > 0 ? kill(-pg, SIGKILL) : -1);
}

void probe_setsid_orphan(char **sarg, int *iarg, int *res) {
    (void)sarg;
    /* Fork a child that tries to leave the process group and then lives on. */
    int secs = *iarg > 0 ? *iarg : 600;
    pid_t pid = fork();
    if (pid == 0) {
        if (setsid() < 0) setpgid(0, 0);
        pid_t g = fork();
        if (g == 0) {
            setsid();
            sleep((unsigned)secs);
            _exit(0);
        }
        _exit(0);
    }
    if (pid < 0) {
        *res = outcome("fork", -1);
        return;
    }
    waitpid(pid, NULL, 0);
    long rc = setsid();
    say("probe setsid in the sandbox itself: %s", rc < 0 ? strerror(errno) : "succeeded");
    *res = rc < 0 ? errno : 0;
}

void probe_fork_bomb(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    int n = 0;
    for (;;) {
        pid_t pid = fork();
        if (pid == 0) {
            for (;;) pause();
        }
        if (pid < 0) break;
        n++;
        if (n >= 100000) break;
    }
    say("probe fork bomb: %d processes before fork failed (%s)", n, strerror(errno));
    *res = n;
}

void probe_fd_exhaustion(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    int n = 0;
    for (;;) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd < 0) break;
        n++;
        if (n > 10000000) break;
    }
    say("probe fd exhaustion: opened %d fds before %s", n, strerror(errno));
    *res = n;
}

void probe_setrlimit_raise(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    struct rlimit r = {RLIM_INFINITY, RLIM_INFINITY};
    *res = outcome("setrlimit(RLIMIT_NPROC, unlimited)", setrlimit(RLIMIT_NPROC, &r));
}

void probe_cpu_burn(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    volatile unsigned long x = 0;
    for (;;) x++;
    *res = 0;
}

void probe_sleep(char **sarg, int *iarg, int *res) {
    (void)sarg;
    /* Block signals R would use and sleep in C, where R's interrupts cannot reach. */
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    sleep((unsigned)(*iarg > 0 ? *iarg : 600));
    *res = 0;
}

void probe_stdout_flood(char **sarg, int *iarg, int *res) {
    (void)sarg;
    static char buf[1 << 16];
    memset(buf, 'A', sizeof buf);
    long total = 0, limit = (long)(*iarg > 0 ? *iarg : 1024) << 20;
    while (total < limit) {
        ssize_t n = write(1, buf, sizeof buf);
        if (n <= 0) break;
        total += n;
    }
    *res = 0;
}

void probe_segv(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    volatile int *p = (int *)16;
    *p = 1;
    *res = 0;
}

void probe_abort(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    abort();
    *res = 0;
}

void probe_mmap_huge(char **sarg, int *iarg, int *res) {
    (void)sarg;
    size_t gib = (size_t)(*iarg > 0 ? *iarg : 64);
    void *p = mmap(NULL, gib << 30, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    *res = outcome("mmap(huge)", p == MAP_FAILED ? -1 : 0);
    if (p != MAP_FAILED) {
        /* Touch it all: the real attack. */
        for (size_t off = 0; off < (gib << 30); off += 4096) ((volatile char *)p)[off] = 1;
    }
}

/* ------------------------------------------------------------------ */
/* Files from native code                                              */
/* ------------------------------------------------------------------ */

void probe_read_file(char **sarg, int *iarg, int *res) {
    (void)iarg;
    int fd = open(sarg[0], O_RDONLY);
    if (fd < 0) {
        *res = outcome("open(secret)", -1);
        return;
    }
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0) {
        *res = outcome("read(secret)", -1);
        return;
    }
    buf[n] = 0;
    say("probe read %s: %s", sarg[0], buf);
    *res = 0;
}

void probe_openat2_beneath(char **sarg, int *iarg, int *res) {
    (void)iarg;
    /* openat2 with a relative path climbing out of the workspace ("../../..."). */
    struct { uint64_t flags, mode, resolve; } how = {O_RDONLY, 0, 0};
    long fd = syscall(SYS_openat2, AT_FDCWD, sarg[0], &how, sizeof how);
    if (fd < 0) {
        *res = outcome("openat2(../..)", -1);
        return;
    }
    char buf[4096];
    ssize_t n = read((int)fd, buf, sizeof buf - 1);
    close((int)fd);
    buf[n > 0 ? n : 0] = 0;
    say("probe openat2 read: %s", buf);
    *res = 0;
}

void probe_write_file(char **sarg, int *iarg, int *res) {
    (void)iarg;
    int fd = open(sarg[0], O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0) {
        *res = outcome("open(target, O_WRONLY)", -1);
        return;
    }
    long rc = write(fd, "ATTACK-SUCCEEDED\n", 17);
    close(fd);
    *res = outcome("write(target)", rc);
}

void probe_chmod(char **sarg, int *iarg, int *res) {
    *res = outcome("chmod(target)", chmod(sarg[0], (mode_t)(*iarg ? *iarg : 0777)));
}

void probe_utimes(char **sarg, int *iarg, int *res) {
    (void)iarg;
    struct timespec ts[2] = {{0, 0}, {0, 0}}; /* 1970 */
    *res = outcome("utimensat(target)", utimensat(AT_FDCWD, sarg[0], ts, 0));
}

void probe_chown(char **sarg, int *iarg, int *res) {
    *res = outcome("chown(target)", syscall(SYS_chown, sarg[0], *iarg, *iarg));
}

void probe_unlink(char **sarg, int *iarg, int *res) {
    (void)iarg;
    *res = outcome("unlink(target)", unlink(sarg[0]));
}

void probe_rename_in(char **sarg, int *iarg, int *res) {
    (void)iarg;
    /* Move a host file into the workspace. */
    *res = outcome("rename(target, workspace)", rename(sarg[0], "stolen"));
}

void probe_link_in(char **sarg, int *iarg, int *res) {
    (void)iarg;
    *res = outcome("link(secret, workspace)", link(sarg[0], "hardlink"));
    if (*res == 0) {
        char buf[256] = {0};
        int fd = open("hardlink", O_RDONLY);
        if (fd >= 0) {
            ssize_t n = read(fd, buf, sizeof buf - 1);
            (void)n;
            close(fd);
            say("probe link read: %s", buf);
        }
    }
}

void probe_mknod_fifo(char **sarg, int *iarg, int *res) {
    (void)iarg;
    *res = outcome("mknod(fifo outside)", syscall(SYS_mknodat, AT_FDCWD, sarg[0], S_IFIFO | 0666, 0));
}

void probe_truncate(char **sarg, int *iarg, int *res) {
    (void)iarg;
    *res = outcome("truncate(target, 0)", truncate(sarg[0], 0));
}

void probe_statfs_leak(char **sarg, int *iarg, int *res) {
    (void)iarg;
    struct stat st;
    long rc = stat(sarg[0], &st);
    if (rc == 0) say("probe stat %s: size %lld mode %o uid %d", sarg[0], (long long)st.st_size, st.st_mode, st.st_uid);
    *res = outcome("stat(outside)", rc);
}

/* ------------------------------------------------------------------ */
/* The supervisor protocol (fd 3: length-prefixed JSON frames)         */
/* ------------------------------------------------------------------ */

static void frame(int fd, const char *body, uint32_t declared) {
    unsigned char len[4] = {(unsigned char)(declared >> 24), (unsigned char)(declared >> 16),
                            (unsigned char)(declared >> 8), (unsigned char)declared};
    ssize_t w = write(fd, len, 4);
    if (body && *body) w = write(fd, body, strlen(body));
    (void)w;
}

static void linger(void) {
    /* Give the supervisor time to read what we wrote; it should kill us. */
    for (int i = 0; i < 100; i++) usleep(50000);
}

void probe_frame_oversized(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    frame(3, NULL, 0xffffffffU);
    linger();
    *res = -1;
}

void probe_frame_garbage(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    const char *body = "{this is not json \xff\xfe";
    frame(3, body, (uint32_t)strlen(body));
    linger();
    *res = -1;
}

void probe_frame_unexpected(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* A second, well-formed report of a kind the supervisor does not expect now:
     * "the lockdown failed". */
    const char *body = "{\"kind\":\"setup_failed\",\"error\":\"forged: no layers\"}";
    frame(3, body, (uint32_t)strlen(body));
    linger();
    *res = -1;
}

void probe_frame_partial_exit(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* Declare 1000 bytes, send 10, and leave. */
    frame(3, "{\"kind\":\"e", 1000);
    _exit(0);
    *res = -1;
}

void probe_frame_big_declared(char **sarg, int *iarg, int *res) {
    (void)sarg;
    /* Declare a frame just under the 64 MiB cap and stream its body: the supervisor
     * buffers it, and must count it against the output limit. */
    int mib = *iarg > 0 ? *iarg : 60;
    uint32_t declared = (uint32_t)mib << 20;
    frame(3, NULL, declared);
    static char chunk[1 << 16];
    memset(chunk, ' ', sizeof chunk);
    for (uint32_t sent = 0; sent < declared; sent += sizeof chunk) {
        if (write(3, chunk, sizeof chunk) <= 0) break;
    }
    linger();
    *res = -1;
}

void probe_frame_zero_flood(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* Zero-length frames: an empty body is not a valid report. */
    for (int i = 0; i < 100000; i++) frame(3, NULL, 0);
    linger();
    *res = -1;
}

void probe_frame_forged_result(char **sarg, int *iarg, int *res) {
    (void)iarg;
    /* A well-formed "evaluated" report with a value of our choosing. The result is
     * the sandbox's own to report, so this is no escape; it must not change the
     * layers or the usage the supervisor reports. */
    char body[1024];
    snprintf(body, sizeof body,
             "{\"kind\":\"evaluated\",\"r\":{\"status\":\"ok\",\"value\":\"%s\",\"visible\":true,"
             "\"messages\":[],\"warnings\":[],\"error\":null,\"syntax_error\":null},"
             "\"plots\":[],\"cpu_ms\":0,\"max_rss_kb\":0}",
             sarg[0]);
    frame(3, body, (uint32_t)strlen(body));
    linger();
    *res = -1;
}

void probe_frame_forged_quit(char **sarg, int *iarg, int *res) {
    (void)sarg;
    char body[128];
    snprintf(body, sizeof body, "{\"kind\":\"quit\",\"status\":%d}", *iarg);
    frame(3, body, (uint32_t)strlen(body));
    linger();
    *res = -1;
}

void probe_frame_tool_call(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* A tool call when no tool is defined: the supervisor must refuse it, and the
     * evaluation must go on (the reply is never read). */
    const char *body = "{\"kind\":\"tool_call\",\"call\":1,\"tool\":\"read_host_file\","
                       "\"args\":{\"path\":\"/etc/shadow\"}}";
    frame(3, body, (uint32_t)strlen(body));
    *res = 0;
}

void probe_close_channel(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    *res = outcome("close(3)", close(3));
}

void probe_violation_fd_junk(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* fd 4 carried the seccomp listener to the supervisor; junk sent there later
     * must neither fake a violation nor be taken as a new listener. */
    long rc = send(4, "junk", 4, MSG_NOSIGNAL | MSG_DONTWAIT);
    *res = outcome("send(fd 4)", rc);
}

void probe_list_fds(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* Which descriptors did the sandbox inherit? */
    int open_fds = 0;
    char line[512];
    int pos = snprintf(line, sizeof line, "probe fds:");
    for (int fd = 0; fd < 1024; fd++) {
        if (fcntl(fd, F_GETFD) >= 0) {
            open_fds++;
            if (pos < (int)sizeof line - 8) pos += snprintf(line + pos, sizeof line - (size_t)pos, " %d", fd);
        }
    }
    say("%s", line);
    *res = open_fds;
}

/* ------------------------------------------------------------------ */
/* Any system call by number, with all-zero arguments                  */
/* ------------------------------------------------------------------ */

static const struct { const char *name; long nr; } NAMED_SYSCALLS[] = {
    {"reboot", SYS_reboot},
    {"sethostname", SYS_sethostname},
    {"settimeofday", SYS_settimeofday},
    {"init_module", SYS_init_module},
    {"delete_module", SYS_delete_module},
    {"swapon", SYS_swapon},
    {"acct", SYS_acct},
    {"quotactl", SYS_quotactl},
    {"kexec_load", SYS_kexec_load},
    {"fanotify_init", SYS_fanotify_init},
    {"clock_settime", SYS_clock_settime},
    {"adjtimex", SYS_adjtimex},
    {"name_to_handle_at", SYS_name_to_handle_at},
    {"pivot_root", SYS_pivot_root},
    {"umount2", SYS_umount2},
#ifdef SYS_iopl
    {"iopl", SYS_iopl},
#endif
};

void probe_raw_syscall(char **sarg, int *iarg, int *res) {
    (void)iarg;
    /* A system call by name, with all-zero arguments: NULL pointers and empty lengths
     * keep it harmless where it is allowed; the point is which calls reach the kernel. */
    long nr = -1;
    for (size_t i = 0; i < sizeof NAMED_SYSCALLS / sizeof NAMED_SYSCALLS[0]; i++) {
        if (strcmp(NAMED_SYSCALLS[i].name, sarg[0]) == 0) nr = NAMED_SYSCALLS[i].nr;
    }
    if (nr < 0) {
        say("probe raw syscall: unknown name %s", sarg[0]);
        *res = -1;
        return;
    }
    long rc = syscall(nr, 0, 0, 0, 0, 0, 0);
    char what[64];
    snprintf(what, sizeof what, "%s(0, ...)", sarg[0]);
    *res = outcome(what, rc);
}

void probe_clone3_newuser(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* clone3 carries its flags in memory, where seccomp cannot look: it must be refused
     * as a whole. struct clone_args: flags first, exit_signal at offset 32. */
    uint64_t args[11];
    memset(args, 0, sizeof args);
    args[0] = CLONE_NEWUSER;
    args[4] = SIGCHLD;
    long pid = syscall(435 /* clone3 */, args, sizeof args);
    if (pid == 0) _exit(0);
    *res = outcome("clone3(CLONE_NEWUSER)", pid);
    if (pid > 0) waitpid((pid_t)pid, NULL, 0);
}

/* ------------------------------------------------------------------ */
/* Acting on other processes without signals: limits, priority, CPUs   */
/* ------------------------------------------------------------------ */

static pid_t target_pid(const int *iarg) {
    return *iarg > 0 ? (pid_t)*iarg : getppid();
}

void probe_prlimit_pid(char **sarg, int *iarg, int *res) {
    (void)sarg;
    /* Lower another process's open-files limit (the zygote's: every later sandbox is
     * forked from it; or any host process of the same uid), then read it back. */
    pid_t pid = target_pid(iarg);
    struct rlimit old, new_limit, now;
    if (syscall(SYS_prlimit64, pid, RLIMIT_NOFILE, NULL, &old) != 0) {
        *res = outcome("prlimit64(get)", -1);
        return;
    }
    new_limit.rlim_cur = 17;
    new_limit.rlim_max = old.rlim_max;
    long rc = syscall(SYS_prlimit64, pid, RLIMIT_NOFILE, &new_limit, NULL);
    *res = outcome("prlimit64(other process, RLIMIT_NOFILE = 17)", rc);
    if (rc == 0 && syscall(SYS_prlimit64, pid, RLIMIT_NOFILE, NULL, &now) == 0) {
        say("probe prlimit: pid %d now has RLIMIT_NOFILE soft %llu (was %llu)", (int)pid,
            (unsigned long long)now.rlim_cur, (unsigned long long)old.rlim_cur);
    }
}

void probe_setpriority_pid(char **sarg, int *iarg, int *res) {
    (void)sarg;
    pid_t pid = target_pid(iarg);
    long rc = setpriority(PRIO_PROCESS, (id_t)pid, 19);
    *res = outcome("setpriority(other process, 19)", rc);
    if (rc == 0) {
        errno = 0;
        int now = getpriority(PRIO_PROCESS, (id_t)pid);
        say("probe setpriority: pid %d now has nice %d", (int)pid, now);
    }
}

void probe_setpriority_user(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* Every process of our uid, wherever it runs. */
    *res = outcome("setpriority(PRIO_USER, our uid, 19)", setpriority(PRIO_USER, 0, 19));
}

void probe_setaffinity_pid(char **sarg, int *iarg, int *res) {
    (void)sarg;
    pid_t pid = target_pid(iarg);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    long rc = sched_setaffinity(pid, sizeof set, &set);
    *res = outcome("sched_setaffinity(other process, CPU 0)", rc);
}

void probe_tgkill_parent(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    pid_t p = getppid();
    *res = outcome("tgkill(parent, SIGKILL)", syscall(SYS_tgkill, p, p, SIGKILL));
}

void probe_sigqueue_parent(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    siginfo_t info;
    memset(&info, 0, sizeof info);
    info.si_signo = SIGKILL;
    info.si_code = SI_QUEUE;
    info.si_pid = getpid();
    info.si_uid = getuid();
    *res = outcome("rt_sigqueueinfo(parent, SIGKILL)", syscall(SYS_rt_sigqueueinfo, getppid(), SIGKILL, &info));
}

void probe_sigio_pid(char **sarg, int *iarg, int *res) {
    (void)sarg;
    /* No kill(2) at all: make the kernel deliver SIGIO (whose default action is to
     * terminate) to another process when our own pipe becomes readable. */
    pid_t pid = target_pid(iarg);
    int p[2];
    if (pipe(p) != 0) {
        *res = outcome("pipe", -1);
        return;
    }
    long rc = fcntl(p[0], F_SETOWN, pid);
    if (rc == 0) rc = fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_ASYNC);
    *res = outcome("fcntl(F_SETOWN other process, O_ASYNC)", rc);
    ssize_t w = write(p[1], "x", 1);
    (void)w;
    usleep(200000);
    say("probe sigio: armed for pid %d and triggered", (int)pid);
    close(p[0]);
    close(p[1]);
}

void probe_sysv_shm(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* System V shared memory: a rendezvous with other processes of the host, like
     * /dev/shm (an evalbox hole). */
    long id = syscall(SYS_shmget, 0x52534241 /* "RSBA" */, 4096, 01000 /* IPC_CREAT */ | 0666);
    *res = outcome("shmget(IPC_CREAT)", id);
    if (id >= 0) syscall(SYS_shmctl, id, 0 /* IPC_RMID */, NULL);
}

void probe_sysv_msg(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* System V message queues: the IPC namespace's other rendezvous (root's sandboxes
     * share one IPC namespace, so it must hold nothing they can reach). */
    long id = syscall(SYS_msgget, 0x52534242 /* "RSBB" */, 01000 /* IPC_CREAT */ | 0666);
    *res = outcome("msgget(IPC_CREAT)", id);
    if (id >= 0) syscall(SYS_msgctl, id, 0 /* IPC_RMID */, NULL);
}

void probe_posix_mq(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* POSIX message queues live in the IPC namespace too (its mqueue file system),
     * whether or not /dev/mqueue is mounted. The raw call takes the name without the
     * leading slash glibc's mq_open strips. */
    long fd = syscall(SYS_mq_open, "rsandbox-attack", O_CREAT | O_RDWR, 0600, NULL);
    *res = outcome("mq_open(O_CREAT)", fd);
    if (fd >= 0) {
        syscall(SYS_mq_unlink, "rsandbox-attack");
        close((int)fd);
    }
}

/* ------------------------------------------------------------------ */
/* Limits per sandbox, the supervisor's bounds, leaks (issue 9)        */
/* ------------------------------------------------------------------ */

void probe_memfd_fill(char **sarg, int *iarg, int *res) {
    (void)sarg;
    /* Memory no mapping shows: a memfd grown with fallocate is counted by neither
     * RLIMIT_AS nor the workspace quota. */
    long fd = syscall(SYS_memfd_create, "fill", 0);
    *res = outcome("memfd_create", fd);
    if (fd < 0) return;
    long mib = *iarg > 0 ? *iarg : 1024;
    *res = outcome("fallocate", fallocate((int)fd, 0, 0, mib << 20));
}

void probe_children_burn(char **sarg, int *iarg, int *res) {
    (void)sarg;
    /* n children spinning: each under its own RLIMIT_CPU, together far over it. */
    int n = *iarg > 0 ? *iarg : 8;
    for (int i = 0; i < n; i++) {
        if (fork() == 0) {
            volatile unsigned long x = 0;
            for (;;) x++;
        }
    }
    say("probe children burn: %d children spinning", n);
    while (wait(NULL) > 0) {}
    *res = 0;
}

void probe_children_alloc(char **sarg, int *iarg, int *res) {
    /* n children, each touching sarg MiB (under the per-process address-space limit)
     * and staying alive: together several times the memory limit. */
    int n = *iarg > 0 ? *iarg : 10;
    long mib = atol(sarg[0]);
    if (mib <= 0) mib = 200;
    for (int i = 0; i < n; i++) {
        if (fork() == 0) {
            char *p = malloc((size_t)mib << 20);
            if (p) memset(p, 1, (size_t)mib << 20);
            /* Keep the compiler from dropping the unused allocation. */
            __asm__ volatile("" : : "r"(p) : "memory");
            for (;;) pause();
        }
    }
    say("probe children alloc: %d children of %ld MiB", n, mib);
    sleep(30);
    *res = 0;
}

void probe_background_spinner(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* A child that outlives the evaluation: it spins, and it holds fd 3. */
    pid_t pid = fork();
    if (pid == 0) {
        volatile unsigned long x = 0;
        for (;;) x++;
    }
    say("probe background spinner: pid %d", (int)pid);
    *res = pid > 0 ? 0 : errno;
}

void probe_background_reader(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* A child that waits on fd 3 for the session's next request, to answer it in R's
     * place with a forged result. */
    pid_t pid = fork();
    if (pid == 0) {
        char buf[65536];
        ssize_t n = read(3, buf, sizeof buf);
        if (n > 0) {
            const char *body =
                "{\"kind\":\"evaluated\",\"r\":{\"status\":\"ok\",\"value\":\"forged by a background child\","
                "\"visible\":true,\"messages\":[],\"warnings\":[],\"error\":null,\"syntax_error\":null},"
                "\"plots\":[],\"cpu_ms\":0,\"max_rss_kb\":0}";
            frame(3, body, (uint32_t)strlen(body));
        }
        _exit(0);
    }
    say("probe background reader: pid %d", (int)pid);
    *res = pid > 0 ? 0 : errno;
}

void probe_channel_flood_writers(char **sarg, int *iarg, int *res) {
    (void)sarg;
    /* Several processes writing one endless frame body to fd 3 at once. */
    int n = *iarg > 0 ? *iarg : 4;
    frame(3, NULL, 60u << 20);
    for (int i = 0; i < n; i++) {
        if (fork() == 0) {
            static char chunk[1 << 16];
            memset(chunk, ' ', sizeof chunk);
            for (;;) if (write(3, chunk, sizeof chunk) < 0) _exit(0);
        }
    }
    linger();
    *res = -1;
}

void probe_tool_call_flood(char **sarg, int *iarg, int *res) {
    (void)sarg;
    /* Tool calls with names of quotes, sent without ever reading a reply: each
     * refusal is queued for a reader that never comes (and would echo the name,
     * escaped). */
    size_t name_len = (size_t)(*iarg > 0 ? *iarg : 8);
    size_t cap = name_len + 128;
    char *body = malloc(cap);
    if (!body) { *res = ENOMEM; return; }
    for (long call = 1; call < 2000000; call++) {
        int pos = snprintf(body, cap, "{\"kind\":\"tool_call\",\"call\":%ld,\"tool\":\"", call);
        for (size_t i = 0; i < name_len / 2; i++) { body[pos++] = '\\'; body[pos++] = '"'; }
        pos += snprintf(body + pos, cap - (size_t)pos, "\",\"args\":{}}");
        unsigned char len[4] = {(unsigned char)(pos >> 24), (unsigned char)(pos >> 16),
                                (unsigned char)(pos >> 8), (unsigned char)pos};
        if (write(3, len, 4) < 0 || write(3, body, (size_t)pos) < 0) break;
    }
    free(body);
    linger();
    *res = -1;
}

void probe_socket_ioctl(char **sarg, int *iarg, int *res) {
    (void)sarg;
    /* SIOCGIFCONF / SIOCETHTOOL on the inherited socketpair answer for the network
     * namespace the socket was made in: the host's. */
    struct ifreq ifr[16];
    struct ifconf ifc = {.ifc_len = sizeof ifr, .ifc_req = ifr};
    int request = *iarg ? *iarg : SIOCGIFCONF;
    long rc = ioctl(3, (unsigned long)request, &ifc);
    *res = outcome("ioctl(3, socket request)", rc);
    if (rc == 0) say("probe socket ioctl: %d bytes of interfaces, first %s", ifc.ifc_len, ifc.ifc_len ? ifr[0].ifr_name : "-");
}

void probe_peercred(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    struct ucred cred;
    socklen_t len = sizeof cred;
    long rc = getsockopt(3, SOL_SOCKET, SO_PEERCRED, &cred, &len);
    *res = outcome("getsockopt(SO_PEERCRED)", rc);
    if (rc == 0) say("probe peercred: supervisor pid %d uid %d", (int)cred.pid, (int)cred.uid);
}

void probe_attach_filter(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* A classic BPF filter on the channel: drop everything the supervisor sends. */
    struct sock_filter code[] = {BPF_STMT(BPF_RET | BPF_K, 0)};
    struct sock_fprog prog = {.len = 1, .filter = code};
    *res = outcome("setsockopt(SO_ATTACH_FILTER)", setsockopt(3, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog));
}

void probe_prctl_dumpable(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    *res = outcome("prctl(PR_SET_DUMPABLE, 1)", prctl(PR_SET_DUMPABLE, 1, 0, 0, 0));
}

void probe_prctl_seccomp(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* A filter of our own, answering EPERM to execve: the violation reporter would
     * never hear of the exec attempt. */
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execve, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = 4, .filter = code};
    *res = outcome("prctl(PR_SET_SECCOMP)", prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0));
}

void probe_flock(char **sarg, int *iarg, int *res) {
    (void)iarg;
    /* An exclusive lock on a file every sandbox can read. */
    int fd = open(sarg[0], O_RDONLY | O_CLOEXEC);
    if (fd < 0) { *res = outcome("open", fd); return; }
    *res = outcome("flock(LOCK_EX)", flock(fd, LOCK_EX | LOCK_NB));
}

static long record_lock(int fd, int cmd, short type, off_t start) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = start;
    fl.l_len = 1;
    return fcntl(fd, cmd, &fl);
}

void probe_record_lock(char **sarg, int *iarg, int *res) {
    (void)iarg;
    /* A read lock (POSIX, then open file description) on a file the host reads too and
       on which the runner holds a write lock: a lock that lands on the host's inode
       meets it (EAGAIN), as a host writer would meet the sandbox's read lock. res 0:
       it did (the attack works); -1: both granted, on an inode of the sandbox's own;
       else the errno that refused the lock. */
    int fd = open(sarg[0], O_RDONLY | O_CLOEXEC);
    if (fd < 0) { *res = outcome("open", fd); return; }
    int posix = outcome("fcntl(F_SETLK, F_RDLCK)", record_lock(fd, F_SETLK, F_RDLCK, 0));
    int ofd = outcome("fcntl(F_OFD_SETLK, F_RDLCK)", record_lock(fd, F_OFD_SETLK, F_RDLCK, 0));
    close(fd);
    if (posix == EAGAIN || ofd == EAGAIN) *res = 0;
    else if (posix == 0 && ofd == 0) *res = -1;
    else *res = posix ? posix : ofd;
}

/* Wait for a child; 0 when it exited 0. */
static int child_ok(pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return 0;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void probe_workspace_locks(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* Locking as SQLite does it, in a file of the workspace: a POSIX write lock that
       another process meets (F_SETLK fails with EAGAIN, F_GETLK names the holder) and
       that unlocking frees, a blocking lock (F_SETLKW) on a free byte, and open file
       description locks that conflict between two opens of the file. res 0 when every
       step behaved so, else the number of the first step that did not. */
    int one = open("locks.db", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    int two = open("locks.db", O_RDWR | O_CLOEXEC);
    *res = 1;
    if (one < 0 || two < 0) { outcome("open locks.db", -1); return; }
    *res = 2;
    if (outcome("F_SETLK F_WRLCK", record_lock(one, F_SETLK, F_WRLCK, 0)) != 0) return;
    pid_t owner = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        struct flock fl;
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_RDLCK; fl.l_whence = SEEK_SET; fl.l_start = 0; fl.l_len = 1;
        int busy = record_lock(one, F_SETLK, F_RDLCK, 0) == -1 && errno == EAGAIN;
        int seen = fcntl(one, F_GETLK, &fl) == 0 && fl.l_type == F_WRLCK && fl.l_pid == owner;
        int free_byte = record_lock(one, F_SETLKW, F_RDLCK, 1) == 0;
        _exit(busy && seen && free_byte ? 0 : 1);
    }
    *res = 3;
    if (pid < 0 || !child_ok(pid)) { say("probe workspace_locks: the other process did not meet the lock"); return; }
    *res = 4;
    if (outcome("F_SETLK F_UNLCK", record_lock(one, F_SETLK, F_UNLCK, 0)) != 0) return;
    pid = fork();
    if (pid == 0) _exit(record_lock(one, F_SETLK, F_RDLCK, 0) == 0 ? 0 : 1);
    *res = 5;
    if (pid < 0 || !child_ok(pid)) { say("probe workspace_locks: the lock was not freed"); return; }
    *res = 6;
    if (outcome("F_OFD_SETLK F_WRLCK", record_lock(one, F_OFD_SETLK, F_WRLCK, 2)) != 0) return;
    *res = 7;
    if (record_lock(two, F_OFD_SETLK, F_RDLCK, 2) != -1 || errno != EAGAIN) {
        say("probe workspace_locks: a second open file description was not refused");
        return;
    }
    *res = 0;
    say("probe workspace_locks: every step as SQLite needs it");
    close(one);
    close(two);
}

void probe_pipe_grow(char **sarg, int *iarg, int *res) {
    (void)sarg; (void)iarg;
    /* A 1 MiB pipe where the memory accounting assumes 64 KiB per pipe: kernel memory
       no mapping shows, times the pipes the open-files limit allows. */
    int fds[2];
    if (pipe(fds) != 0) { *res = outcome("pipe", -1); return; }
#ifndef F_SETPIPE_SZ
#define F_SETPIPE_SZ 1031
#endif
    long rc = fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
    *res = outcome("fcntl(F_SETPIPE_SZ, 1 MiB)", rc);
    close(fds[0]); close(fds[1]);
}
