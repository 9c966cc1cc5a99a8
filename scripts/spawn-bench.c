/* Starts each command in turn, RUNS rounds after WARMUP, with FILE as its stdin and its output
 * thrown away, and prints each command's wall time per start (p50, p90, p99, min). Interleaved,
 * so a host that speeds up or slows down in the middle moves every command alike; hyperfine
 * runs one command's rounds after the other's. For `wakebridge hook` against /bin/true
 * (docs/benchmarks.md, "CLI verbs").
 *
 *   cc -O2 -o /tmp/spawn-bench scripts/spawn-bench.c
 *   /tmp/spawn-bench RUNS WARMUP FILE '/bin/true' 'target/release/wakebridge hook' ...
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One start of `command` (words split on spaces), in milliseconds. */
static double start_once(const char *command, const char *input) {
  char words[4096];
  char *argv[16];
  int argc = 0;
  snprintf(words, sizeof words, "%s", command);
  for (char *w = strtok(words, " "); w && argc < 15; w = strtok(NULL, " ")) argv[argc++] = w;
  argv[argc] = NULL;
  struct timespec began, ended;
  clock_gettime(CLOCK_MONOTONIC, &began);
  pid_t pid = fork();
  if (pid == 0) {
    int in = open(input, O_RDONLY), out = open("/dev/null", O_WRONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    execv(argv[0], argv);
    _exit(127);
  }
  int status;
  waitpid(pid, &status, 0);
  clock_gettime(CLOCK_MONOTONIC, &ended);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fprintf(stderr, "%s: status %d\n", command, status);
  return (ended.tv_sec - began.tv_sec) * 1e3 + (ended.tv_nsec - began.tv_nsec) / 1e6;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s RUNS WARMUP FILE COMMAND...\n", argv[0]);
    return 2;
  }
  int runs = atoi(argv[1]), warmup = atoi(argv[2]), commands = argc - 4;
  if (runs < 1 || warmup < 0 || access(argv[3], R_OK) != 0) {
    fprintf(stderr, "RUNS must be 1 or more, WARMUP 0 or more, and %s readable\n", argv[3]);
    return 2;
  }
  double *times = malloc(sizeof(double) * runs * commands);
  for (int round = -warmup; round < runs; round++)
    for (int c = 0; c < commands; c++) {
      double ms = start_once(argv[4 + c], argv[3]);
      if (round >= 0) times[c * runs + round] = ms;
    }
  for (int c = 0; c < commands; c++) {
    double *t = times + c * runs;
    qsort(t, runs, sizeof(double), by_value);
    printf("%-44s p50 %.2f  p90 %.2f  p99 %.2f  min %.2f ms\n", argv[4 + c], t[runs / 2],
           t[runs * 9 / 10], t[runs * 99 / 100], t[0]);
  }
  return 0;
}
