/* ab-gateway-forward: run a command with a loopback TCP port relayed to a Unix socket.
 *
 *     forward PORT SOCKET -- COMMAND [ARG...]
 *
 * The sandbox's side of the model gateway (see sandbox/gateway_mount.py). It listens on
 * 127.0.0.1:PORT, starts COMMAND as its child, and relays every connection accepted on the
 * port to the Unix socket SOCKET (the gateway's, bind-mounted into the sandbox), byte for byte
 * in both directions, until COMMAND ends; then it exits with COMMAND's status (re-raising the
 * signal that killed it). So a CLI gets a plain HTTP base URL while the sandbox's network stays
 * "none": the only thing the port leads to is the gateway.
 *
 * - The port is bound before COMMAND starts: its first request never races the listener.
 * - SO_REUSEPORT: concurrent execs of one Docker container share its network namespace, and
 *   each exec's forwarder binds the same port (the kernel spreads connections among them; they
 *   all lead to the same socket). So a connection this forwarder accepted may be another
 *   exec's: when COMMAND ends, the forwarder closes its listener (the container sets
 *   net.ipv4.tcp_migrate_req, so connections still queued on it move to another exec's
 *   listener instead of being reset), relays the connections it holds to their end (the
 *   gateway closes a sandbox's connection after each answer), and only then exits. One whose
 *   client has gone (HTTP clients do not half-close), or that has sent nothing
 *   DRAIN_SILENT_SEC after COMMAND ended, is closed then.
 * - If the port cannot be bound (a test server holds it, say), COMMAND runs anyway, without
 *   the gateway, after one line on stderr.
 * - SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are passed on to COMMAND. The
 *   harness kills the whole exec (process group, PID namespace) on timeouts, this included.
 * - A connection whose socket cannot be reached (the gateway closed) is closed at once.
 *
 * Built statically (gcc -static) once into a content-keyed cache, so it runs in any x86-64
 * image whatever its libc; it needs nothing inside the sandbox.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 64
#define BUF_SIZE 65536
#define DRAIN_SILENT_SEC 5

/* One direction of a connection: bytes read from one side waiting to be written to the other. */
struct flow {
    char buf[BUF_SIZE];
    size_t off, len;
    int eof;  /* the source side will send nothing more */
    int shut; /* the destination side has been told so (shutdown SHUT_WR) */
};

/* fd[0] is the client (TCP), fd[1] the gateway (Unix); flow[i] carries fd[i] -> fd[1 - i]. */
struct conn {
    int fd[2];
    struct flow flow[2];
    int spoke; /* the client has sent something */
};

static int signal_pipe[2] = {-1, -1};
static struct conn *conns[MAX_CONNS];
static int nconns;

static void on_signal(int sig) {
    int saved = errno;
    unsigned char byte = (unsigned char)sig;
    ssize_t ignored = write(signal_pipe[1], &byte, 1);
    (void)ignored;
    errno = saved;
}

static void warn(const char *what, const char *detail) {
    fprintf(stderr, "ab-gateway-forward: %s: %s\n", what, detail);
}

static int listen_loopback(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 64) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static int connect_gateway(const char *path) {
    struct sockaddr_un addr = {0};
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void drop(int i) {
    close(conns[i]->fd[0]);
    close(conns[i]->fd[1]);
    free(conns[i]);
    conns[i] = conns[--nconns];
}

static void accept_one(int listener, const char *path) {
    int client = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (client < 0)
        return;
    struct conn *c = NULL;
    int gateway = -1;
    if (nconns < MAX_CONNS && (c = calloc(1, sizeof *c)) != NULL)
        gateway = connect_gateway(path);
    if (gateway < 0) {
        if (c != NULL && nconns < MAX_CONNS)
            warn("cannot reach the gateway", strerror(errno));
        free(c);
        close(client);
        return;
    }
    int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->fd[0] = client;
    c->fd[1] = gateway;
    conns[nconns++] = c;
}

/* Move what can be moved on one connection; 0 when it is finished (or broken). */
static int pump(struct conn *c, const short *revents) {
    for (int side = 0; side < 2; side++) {
        struct flow *in = &c->flow[side];
        if ((revents[side] & (POLLIN | POLLHUP | POLLERR)) && !in->eof && in->len == 0) {
            ssize_t n = recv(c->fd[side], in->buf, BUF_SIZE, 0);
            if (n > 0) {
                in->off = 0;
                in->len = (size_t)n;
                c->spoke |= side == 0;
            } else if (n == 0) {
                in->eof = 1;
            } else if (errno != EAGAIN && errno != EINTR) {
                return 0;
            }
        }
    }
    for (int side = 0; side < 2; side++) {
        struct flow *out = &c->flow[side];
        int dest = c->fd[1 - side];
        while (out->len > 0) {
            ssize_t n = send(dest, out->buf + out->off, out->len, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                    break;
                return 0;
            }
            out->off += (size_t)n;
            out->len -= (size_t)n;
        }
        if (out->eof && out->len == 0 && !out->shut) {
            shutdown(dest, SHUT_WR);
            out->shut = 1;
        }
    }
    return !(c->flow[0].shut && c->flow[1].shut);
}

static time_t now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static void exit_like(int status) {
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core); /* the child dumped core already, if it was to */
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
        _exit(128 + sig);
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

static void run_command(char **argv) {
    execvp(argv[0], argv);
    int code = errno == ENOENT ? 127 : 126;
    warn(argv[0], strerror(errno));
    _exit(code);
}

int main(int argc, char **argv) {
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: %s PORT SOCKET -- COMMAND [ARG...]\n", argv[0]);
        return 125;
    }
    int port = atoi(argv[1]);
    const char *path = argv[2];
    char **command = argv + 4;

    int listener = listen_loopback(port);
    if (listener < 0) {
        char where[64];
        snprintf(where, sizeof where, "cannot listen on 127.0.0.1:%d", port);
        warn(where, strerror(errno));
        run_command(command); /* without the gateway, rather than not at all */
    }
    if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        warn("pipe", strerror(errno));
        return 125;
    }
    /* Handlers before the fork: a child that ends at once still wakes us. exec resets them. */
    static const int passed_on[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    for (size_t i = 0; i < sizeof passed_on / sizeof passed_on[0]; i++)
        sigaction(passed_on[i], &sa, NULL);

    pid_t child = fork();
    if (child < 0) {
        warn("fork", strerror(errno));
        return 125;
    }
    if (child == 0) {
        signal(SIGCHLD, SIG_DFL);
        for (size_t i = 0; i < sizeof passed_on / sizeof passed_on[0]; i++)
            signal(passed_on[i], SIG_DFL);
        run_command(command);
    }

    struct pollfd fds[2 + 2 * MAX_CONNS];
    int ended = 0, status = 0;
    time_t ended_at = 0;
    for (;;) {
        if (ended) {
            /* COMMAND is over: what is left are connections in flight, perhaps another exec's. */
            int silent_too_long = now() - ended_at >= DRAIN_SILENT_SEC;
            for (int i = nconns - 1; i >= 0; i--)
                if (conns[i]->flow[0].eof || (silent_too_long && !conns[i]->spoke))
                    drop(i); /* the client is gone, or never asked anything */
            if (nconns == 0)
                exit_like(status);
        }
        fds[0] = (struct pollfd){.fd = ended ? -1 : signal_pipe[0], .events = POLLIN};
        fds[1] = (struct pollfd){.fd = !ended && nconns < MAX_CONNS ? listener : -1,
                                 .events = POLLIN};
        for (int i = 0; i < nconns; i++) {
            struct conn *c = conns[i];
            for (int side = 0; side < 2; side++) {
                struct flow *in = &c->flow[side];
                struct flow *out = &c->flow[1 - side];
                short events = 0;
                if (!in->eof && in->len == 0)
                    events |= POLLIN;
                if (out->len > 0)
                    events |= POLLOUT;
                /* A hung-up side we neither read nor write would wake poll at once, forever. */
                fds[2 + 2 * i + side] = (struct pollfd){.fd = events ? c->fd[side] : -1,
                                                        .events = events};
            }
        }
        if (poll(fds, (nfds_t)(2 + 2 * nconns), ended ? 1000 : -1) < 0) {
            if (errno == EINTR)
                continue;
            warn("poll", strerror(errno));
            return 125;
        }
        if (fds[0].revents & POLLIN) {
            unsigned char sigs[64];
            ssize_t n;
            while ((n = read(signal_pipe[0], sigs, sizeof sigs)) > 0)
                for (ssize_t i = 0; i < n; i++)
                    if (sigs[i] != SIGCHLD)
                        kill(child, sigs[i]);
            if (waitpid(child, &status, WNOHANG) == child) {
                ended = 1;
                ended_at = now();
                close(listener); /* queued connections move to a sibling (tcp_migrate_req) */
                listener = -1;
                continue;
            }
        }
        /* Connections first: fds[] still lines up with conns[] before any is accepted. */
        for (int i = nconns - 1; i >= 0; i--) {
            short revents[2] = {fds[2 + 2 * i].revents, fds[2 + 2 * i + 1].revents};
            if (!pump(conns[i], revents))
                drop(i);
        }
        if (fds[1].fd >= 0 && (fds[1].revents & POLLIN))
            accept_one(listener, path);
    }
}
