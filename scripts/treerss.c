/* Run a command and follow the resident set of its process tree.
 *
 * Used by bench_programs.py. Every INTERVAL_MS milliseconds it walks the
 * tree under the command (/proc/PID/task/TID/children, recursively) and
 * adds up the resident pages of every process in it (the second field of
 * /proc/PID/statm: anonymous, file-backed and shared pages, read without
 * taking the process's mmap lock, so the sampling does not stall the
 * program it watches). From those samples: the peak of the sum, and its
 * mean weighted by the time each sample stood for. It also keeps, per
 * process seen, the largest resident set sampled, so the caller can tell
 * which process did the work.
 *
 * Statically linked, like measure.c, so that an LD_PRELOAD meant for the
 * command does not load an allocator into the sampler, and so that the
 * command's ru_maxrss is not charged for a large image replaced at exec.
 *
 * Usage: treerss REPORT_FILE INTERVAL_MS COMMAND [ARG...]
 * Writes to REPORT_FILE:
 *   wall_ns=.. utime_us=.. stime_us=.. maxrss_kib=.. status=.. samples=..
 *     peak_kib=.. avg_kib=..
 *   proc pid=.. peak_kib=.. comm=..      (one line per process seen)
 * maxrss_kib is wait4's figure: the largest peak of any single process of
 * the tree that was waited for (exact, where the samples may miss a short
 * spike). Exits with the command's exit code (128+signal if killed, 127 if
 * it could not be started).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 8192
#define MAX_TREE 4096

struct proc {
	int pid;
	long long peak_kib;
	char comm[32];
};

static struct proc procs[MAX_PROCS];
static int nprocs;
static long page_kib;

static long long ns_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The whole small file at path into buf (NUL-terminated); its length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

static struct proc *proc_entry(int pid)
{
	for (int i = 0; i < nprocs; i++)
		if (procs[i].pid == pid)
			return &procs[i];
	if (nprocs == MAX_PROCS)
		return NULL;
	struct proc *p = &procs[nprocs++];
	p->pid = pid;
	p->peak_kib = 0;
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/comm", pid);
	if (read_small(path, p->comm, sizeof p->comm) > 0)
		p->comm[strcspn(p->comm, "\n")] = '\0';
	else
		strcpy(p->comm, "?");
	return p;
}

/* Resident KiB of pid, or -1 if it is gone. */
static long long rss_kib(int pid)
{
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/%d/statm", pid);
	if (read_small(path, buf, sizeof buf) <= 0)
		return -1;
	unsigned long long size, resident;
	if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
		return -1;
	return (long long)resident * page_kib;
}

/* Append the children of every thread of pid to tree[*n]. */
static void add_children(int pid, int *tree, int *n)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	char buf[4096];
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char cpath[300];
		snprintf(cpath, sizeof cpath, "/proc/%d/task/%s/children", pid, e->d_name);
		if (read_small(cpath, buf, sizeof buf) <= 0)
			continue;
		char *s = buf, *end;
		for (;;) {
			long c = strtol(s, &end, 10);
			if (end == s)
				break;
			s = end;
			if (*n < MAX_TREE)
				tree[(*n)++] = (int)c;
		}
	}
	closedir(d);
}

/* The summed resident KiB of the tree under root; records each process. */
static long long sample(int root)
{
	static int tree[MAX_TREE];
	int n = 0;
	tree[n++] = root;
	long long sum = 0;
	for (int i = 0; i < n; i++) {
		long long kib = rss_kib(tree[i]);
		if (kib < 0)
			continue;
		sum += kib;
		struct proc *p = proc_entry(tree[i]);
		if (p && kib > p->peak_kib) {
			p->peak_kib = kib;
			/* Again: a process sampled first between fork and exec has
			 * its parent's name. */
			char path[64];
			snprintf(path, sizeof path, "/proc/%d/comm", p->pid);
			if (read_small(path, p->comm, sizeof p->comm) > 0)
				p->comm[strcspn(p->comm, "\n")] = '\0';
		}
		add_children(tree[i], tree, &n);
	}
	return sum;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s REPORT_FILE INTERVAL_MS COMMAND [ARG...]\n", argv[0]);
		return 2;
	}
	long interval_ms = strtol(argv[2], NULL, 10);
	if (interval_ms <= 0)
		interval_ms = 5;
	page_kib = sysconf(_SC_PAGESIZE) / 1024;
	long long t0 = ns_now();
	pid_t pid = fork();
	if (pid < 0) {
		perror("treerss: fork");
		return 127;
	}
	if (pid == 0) {
		execvp(argv[3], argv + 3);
		fprintf(stderr, "treerss: cannot run %s: %s\n", argv[3], strerror(errno));
		_exit(127);
	}
	int status = 0;
	struct rusage ru;
	long long samples = 0, peak = 0, last_t = t0, last_kib = 0;
	long double area = 0; /* KiB x ns */
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;) {
		pid_t r = wait4(pid, &status, WNOHANG, &ru);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			perror("treerss: wait4");
			return 127;
		}
		long long kib = sample(pid);
		long long now = ns_now();
		/* Each sample stands for the time since the previous one. */
		area += (long double)last_kib * (now - last_t);
		last_t = now;
		last_kib = kib;
		samples++;
		if (kib > peak)
			peak = kib;
		next.tv_nsec += interval_ms * 1000000L;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		struct timespec cur;
		clock_gettime(CLOCK_MONOTONIC, &cur);
		if (cur.tv_sec > next.tv_sec || (cur.tv_sec == next.tv_sec && cur.tv_nsec > next.tv_nsec))
			next = cur; /* fell behind: no burst of catch-up samples */
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
	}
	long long end = ns_now();
	area += (long double)last_kib * (end - last_t);
	long long wall = end - t0;
	long long avg = wall > 0 ? (long long)(area / wall) : 0;

	FILE *f = fopen(argv[1], "w");
	if (!f) {
		perror("treerss: report file");
		return 127;
	}
	fprintf(f,
		"wall_ns=%lld utime_us=%lld stime_us=%lld maxrss_kib=%ld status=%d samples=%lld "
		"peak_kib=%lld avg_kib=%lld\n",
		wall, (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
		(long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec, ru.ru_maxrss, status,
		samples, peak, avg);
	for (int i = 0; i < nprocs; i++)
		fprintf(f, "proc pid=%d peak_kib=%lld comm=%s\n", procs[i].pid, procs[i].peak_kib,
			procs[i].comm);
	if (fclose(f) != 0) {
		perror("treerss: report file");
		return 127;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
