/* What a short command costs under different allocator settings: wall
 * time and peak RSS of one start-up, median of REPS runs per variant.
 *
 * Every process pays for the allocator's set-up, so its cost must not
 * grow with settings that only raise a limit (a larger heap reservation,
 * smaller pageblocks). Each VARIANT is LABEL:[VAR=VALUE[,VAR=VALUE...]];
 * the command runs REPS times per variant, the variants interleaved, each
 * run with the variables added to (or replacing those in) this program's
 * environment. Give the allocator as LD_PRELOAD in the variants, not to
 * this program: a child's peak RSS includes that of the image it replaced
 * at exec, so this program must stay small. Times come from clock_gettime
 * around fork/exec/wait4, peak RSS from wait4. Nothing here calls malloc
 * between the runs.
 *
 * Usage: startup REPS VARIANT... -- COMMAND [ARG...]
 *   e.g. startup 20 base: big:LD_PRELOAD=lib.so,MBUDDY_HEAP_SIZE=8T -- /bin/true
 * Prints: RESULT workload=startup reps=.. then per variant ms_LABEL=.. (median)
 *         ms_max_LABEL=.. rss_kib_LABEL=.. (median)
 */
#include <sys/resource.h>
#include <sys/wait.h>

#include "common.h"

#define MAX_VARIANTS 8
#define MAX_VARS 8
#define MAX_REPS 200
#define MAX_ENV 1024

extern char **environ;

struct variant {
	char label[32];
	char vars[MAX_VARS][256];
	int nvars;
	double ms[MAX_REPS];
	long rss_kib[MAX_REPS];
};

static struct variant variants[MAX_VARIANTS];

static void parse_variant(struct variant *v, const char *spec)
{
	const char *colon = strchr(spec, ':');
	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof v->label) {
		fprintf(stderr, "variant '%s' is not LABEL:[VAR=VALUE[,VAR=VALUE...]]\n", spec);
		exit(1);
	}
	memcpy(v->label, spec, (size_t)(colon - spec));
	for (const char *s = colon + 1; *s;) {
		const char *end = strchr(s, ',');
		size_t n = end ? (size_t)(end - s) : strlen(s);
		if (v->nvars == MAX_VARS || n >= sizeof v->vars[0] || !memchr(s, '=', n)) {
			fprintf(stderr, "variant '%s': bad or too many variables\n", spec);
			exit(1);
		}
		memcpy(v->vars[v->nvars++], s, n);
		s += n + (end != NULL);
	}
}

/* environ, minus the variables the variant sets, plus them. */
static void build_env(const struct variant *v, char **env)
{
	int n = 0;
	for (char **e = environ; *e && n < MAX_ENV - MAX_VARS - 1; e++) {
		int replaced = 0;
		for (int i = 0; i < v->nvars; i++) {
			size_t klen = (size_t)(strchr(v->vars[i], '=') - v->vars[i]) + 1;
			replaced |= strncmp(*e, v->vars[i], klen) == 0;
		}
		if (!replaced)
			env[n++] = *e;
	}
	for (int i = 0; i < v->nvars; i++)
		env[n++] = (char *)v->vars[i];
	env[n] = NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int sep = 0;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			sep = i;
			break;
		}
	if (argc < 5 || sep < 3 || sep == argc - 1 || sep - 2 > MAX_VARIANTS) {
		fprintf(stderr, "usage: %s REPS VARIANT... -- COMMAND [ARG...]\n", argv[0]);
		return 1;
	}
	int reps = atoi(argv[1]);
	if (reps < 1 || reps > MAX_REPS) {
		fprintf(stderr, "REPS must be 1..%d\n", MAX_REPS);
		return 1;
	}
	int nv = sep - 2;
	for (int i = 0; i < nv; i++)
		parse_variant(&variants[i], argv[2 + i]);
	static char *env[MAX_ENV];
	for (int r = 0; r < reps; r++)
		for (int i = 0; i < nv; i++) {
			struct variant *v = &variants[i];
			build_env(v, env);
			double t0 = now_sec();
			pid_t pid = fork();
			if (pid < 0) {
				perror("fork");
				return 2;
			}
			if (pid == 0) {
				execve(argv[sep + 1], argv + sep + 1, env);
				_exit(127);
			}
			int status;
			struct rusage ru;
			while (wait4(pid, &status, 0, &ru) < 0)
				if (errno != EINTR) {
					perror("wait4");
					return 2;
				}
			v->ms[r] = (now_sec() - t0) * 1e3;
			v->rss_kib[r] = ru.ru_maxrss;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				fprintf(stderr, "FATAL: %s failed (status %d) in variant %s\n", argv[sep + 1],
					status, v->label);
				return 3;
			}
		}
	printf("RESULT workload=startup reps=%d", reps);
	for (int i = 0; i < nv; i++) {
		struct variant *v = &variants[i];
		qsort(v->ms, (size_t)reps, sizeof v->ms[0], cmp_double);
		qsort(v->rss_kib, (size_t)reps, sizeof v->rss_kib[0], cmp_long);
		printf(" ms_%s=%.3f ms_max_%s=%.3f rss_kib_%s=%ld", v->label, v->ms[reps / 2], v->label,
		       v->ms[reps - 1], v->label, v->rss_kib[reps / 2]);
	}
	printf("\n");
	return 0;
}
