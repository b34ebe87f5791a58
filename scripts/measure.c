/* Run a command and record its wall time, CPU time and peak RSS.
 *
 * Why a separate program: a child's ru_maxrss includes the resident size
 * of the process image it replaced at exec, so a command started straight
 * from the Python runner (fork or vfork alike) is charged for the
 * runner's own ~20 MiB. Started from this small, statically linked
 * launcher it is charged a few hundred KiB at most. The figures include
 * the command's own children (wait4 reports the larger of the two peaks),
 * e.g. cc1plus under g++.
 *
 * Usage: measure REPORT_FILE COMMAND [ARG...]
 * Writes one line to REPORT_FILE:
 *   wall_ns=.. utime_us=.. stime_us=.. maxrss_kib=.. status=..
 * where status is the raw wait status. Exits with the command's exit code
 * (128+signal if it was killed, 127 if it could not be started).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long ns_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s REPORT_FILE COMMAND [ARG...]\n", argv[0]);
		return 2;
	}
	long long t0 = ns_now();
	pid_t pid = fork();
	if (pid < 0) {
		perror("measure: fork");
		return 127;
	}
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		fprintf(stderr, "measure: cannot run %s: %s\n", argv[2], strerror(errno));
		_exit(127);
	}
	int status;
	struct rusage ru;
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR) {
			perror("measure: wait4");
			return 127;
		}
	long long wall = ns_now() - t0;

	FILE *f = fopen(argv[1], "w");
	if (!f) {
		perror("measure: report file");
		return 127;
	}
	fprintf(f, "wall_ns=%lld utime_us=%lld stime_us=%lld maxrss_kib=%ld status=%d\n", wall,
		(long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
		(long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec, ru.ru_maxrss, status);
	if (fclose(f) != 0) {
		perror("measure: report file");
		return 127;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
