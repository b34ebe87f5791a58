/* A program that rewrites its environment before it exits, as programs that
 * set a process title do (the title is written over the environ strings),
 * then also calls setenv and clearenv. libmbuddy must still write the
 * report and the profile to the paths that were given at start. */
#include <stdlib.h>
#include <string.h>

extern char **environ;

int main(void)
{
	/* Something for the profile to learn: one site of short-lived objects. */
	for (int i = 0; i < 100000; i++) {
		char *volatile p = malloc(100);
		free(p);
	}
	for (char **e = environ; *e; e++)
		memset(*e, 'X', strlen(*e));
	setenv("MBUDDY_STATS", "moved-stats", 1);
	setenv("MBUDDY_PROFILE", "moved-profile", 1);
	setenv("MBUDDY_RULES", "sym:main=short", 1);
	clearenv();
	return 0;
}
