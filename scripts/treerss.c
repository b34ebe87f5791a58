/* Run a command and follow the resident set of its process tree.
 *
 * Used by bench_programs.py. Every INTERVAL_MS milliseconds it walks the
 * tree under the command (/proc/PID/task/TID/children, recursively) and
 * adds up the resident pages of every process in it (the second field of
 * /proc/PID/statm: anonymous, file-backed and shared pages, read without
 * taking the process's mmap lock, so the sampling does not stall the
 * program it watches; a child that has not called exec is not counted,
 * see sample()). From those samples:
 * the peak of the sum, and its mean weighted by the time each sample
 * stood for. It also keeps, per
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
static long long rss_kib(int pid, char *line, size_t size)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/statm", pid);
	if (read_small(path, line, size) <= 0)
		return -1;
	unsigned long long vsize, resident;
	if (sscanf(line, "%llu %llu", &vsize, &resident) != 2)
		return -1;
	return (long long)resident * page_kib;
}

/* Append the children of every thread of pid to tree[*n], with parent
 * as their parent's index. */
static void add_children(int pid, int parent, int *tree, int *up, int *n)
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
			if (*n < MAX_TREE) {
				up[*n] = parent;
				tree[(*n)++] = (int)c;
			}
		}
	}
	closedir(d);
}

/* The start of pid's code and of its stack (fields 26 and 28 of
 * /proc/PID/stat, read without the mmap lock) into id; 0 if gone. */
static int image_id(int pid, unsigned long long id[2])
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	if (read_small(path, buf, sizeof buf) <= 0)
		return 0;
	char *s = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
	if (!s)
		return 0;
	s++;
	/* s is now at field 3; field 26 is 23 fields on. */
	for (int field = 3; field <= 28; field++) {
		char *end;
		while (*s == ' ')
			s++;
		unsigned long long v = strtoull(s, &end, 10);
		if (field == 3) { /* the state, a letter */
			while (*s && *s != ' ')
				s++;
			continue;
		}
		if (end == s)
			return 0;
		s = end;
		if (field == 26)
			id[0] = v;
		else if (field == 28)
			id[1] = v;
	}
	return 1;
}

/* The summed resident KiB of the tree under root; records each process.
 * A child whose code and stack start where its parent's do has not called
 * exec (the stack of a new image is placed at random): a fork or vfork
 * that maps its parent's pages, shared outright after vfork and
 * copy-on-write after fork, which would be counted twice (for CPython's
 * subprocess, the child between fork and exec doubled the tree's peak at
 * random). It is left out of the sum. */
static long long sample(int root)
{
	static int tree[MAX_TREE], up[MAX_TREE];
	static unsigned long long id[MAX_TREE][2];
	int n = 0;
	up[n] = -1;
	tree[n++] = root;
	long long sum = 0;
	for (int i = 0; i < n; i++) {
		char line[128];
		unsigned long long before[2];
		int had_id = image_id(tree[i], before);
		long long kib = rss_kib(tree[i], line, sizeof line);
		int have_id = image_id(tree[i], id[i]);
		if (!have_id)
			id[i][0] = id[i][1] = 0;
		/* An exec between the two reads of the image: the RSS read
		 * may be the old image's, its parent's pages (CPython's tests
		 * peaked at 104-110 MiB instead of 66-68 in 3 of 8 runs under
		 * libmbuddy, a child of 53 MiB counted mid-exec). Not summed
		 * this time; its children are still looked at. */
		if (kib >= 0 && (!had_id || !have_id || before[0] != id[i][0] || before[1] != id[i][1]))
			kib = -1;
		if (kib < 0) {
			add_children(tree[i], i, tree, up, &n);
			continue;
		}
		int copy = up[i] >= 0 && have_id && id[i][1] != 0 && id[i][0] == id[up[i]][0] &&
			   id[i][1] == id[up[i]][1];
		if (!copy) {
			sum += kib;
			struct proc *p = proc_entry(tree[i]);
			if (p && kib > p->peak_kib) {
				p->peak_kib = kib;
				/* Again: a process sampled first between fork and exec
				 * has its parent's name. */
				char path[64];
				snprintf(path, sizeof path, "/proc/%d/comm", p->pid);
				if (read_small(path, p->comm, sizeof p->comm) > 0)
					p->comm[strcspn(p->comm, "\n")] = '\0';
			}
		}
		add_children(tree[i], i, tree, up, &n);
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
