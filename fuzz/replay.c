/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replay: main() of a fuzz target outside a --enable-fuzz tree. Runs
 * LLVMFuzzerTestOneInput once on each file named, or with no argument on
 * every file of $VNIC_TOP_SRCDIR/fuzz/corpus/NAME and fuzz/regress/NAME
 * (NAME: the program's name without "fuzz_"). A crash, a sanitizer report
 * or an fd leak (the targets check) fails the test; so every seed and
 * every crash ever found runs in the normal suite, under gcc's ASan+UBSan
 * in the sanitize trees.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

/* Weak: a target without an initializer. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

static int run_file(const char *path)
{
	struct stat st;
	uint8_t *buf;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf)
		abort();
	got = st.st_size ? read(fd, buf, (size_t)st.st_size) : 0;
	close(fd);
	if (got != st.st_size) {
		fprintf(stderr, "replay: %s: short read\n", path);
		free(buf);
		return -1;
	}
	LLVMFuzzerTestOneInput(buf, (size_t)st.st_size);
	free(buf);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* run_dir - every regular file of dir, in name order; returns the count
 * run, or -1 on an error (a missing directory is 0 files). */
static int run_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int ran = 0;

	if (!d)
		return errno == ENOENT ? 0 : -1;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				abort();
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (run_file(path) < 0)
			ran = -1;
		else if (ran >= 0)
			ran++;
		free(names[i]);
	}
	free(names);
	return ran;
}

int main(int argc, char **argv)
{
	const char *src = getenv("VNIC_TOP_SRCDIR");
	const char *name = strrchr(argv[0], '/');
	char dir[PATH_MAX];
	int a, b;

	LLVMFuzzerInitialize(&argc, &argv);
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			if (run_file(argv[i]) < 0)
				return 1;
		printf("replay: %d inputs, no crash\n", argc - 1);
		return 0;
	}
	name = name ? name + 1 : argv[0];
	if (!strncmp(name, "lt-", 3))
		name += 3;
	if (!strncmp(name, "fuzz_", 5))
		name += 5;
	if (!src)
		src = ".";
	snprintf(dir, sizeof(dir), "%s/fuzz/corpus/%s", src, name);
	a = run_dir(dir);
	snprintf(dir, sizeof(dir), "%s/fuzz/regress/%s", src, name);
	b = run_dir(dir);
	if (a < 0 || b < 0)
		return 1;
	if (a == 0) {
		fprintf(stderr, "replay: no seed in %s/fuzz/corpus/%s\n", src, name);
		return 1;
	}
	printf("replay %s: %d seeds and %d regression inputs, no crash\n", name, a, b);
	return 0;
}
