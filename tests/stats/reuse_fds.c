/* A program that closes every descriptor from FIRST on (3, or 2 to close
 * stderr too), then opens 110 files of its own in DIR, so that one of
 * them gets the number of libmbuddy's copy of stderr (100), and exits.
 * The exit report (MBUDDY_STATS=stderr) must not land in any of them.
 * Usage: reuse_fds DIR FIRST */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int first = atoi(argv[2]);
	for (int fd = first; fd < 1024; fd++)
		close(fd);
	char name[4096];
	for (int i = 0; i < 110; i++) {
		snprintf(name, sizeof name, "%s/db.%d", argv[1], i);
		if (open(name, O_RDWR | O_CREAT | O_TRUNC, 0600) < 0)
			return 1;
	}
	return 0;
}
