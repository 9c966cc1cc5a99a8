// Times fork+exec+wait of each command with FILE as its stdin, call by call in turn, and prints
// p50/p90/p99/min/mean per command. hyperfine 1.15 (this host's) has no --input and gives
// commands /dev/null. Build: cc -O2 -o runbench scripts/stdin_bench.c
// Usage: runbench RUNS WARMUP FILE 'cmd args' ['cmd args' ...]  (absolute paths; args split on
// spaces; stdout to /dev/null, stderr kept so a complaint shows)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <time.h>
#include <sys/wait.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
extern char **environ;
int main(int argc,char**argv){
  int n=atoi(argv[1]),w=atoi(argv[2]);const char*payload=argv[3];int nc=argc-4;
  char**cmds[16];
  for(int c=0;c<nc;c++){char*s=strdup(argv[4+c]);cmds[c]=calloc(16,sizeof(char*));int k=0;for(char*t=strtok(s," ");t;t=strtok(NULL," "))cmds[c][k++]=t;}
  double*times=calloc((size_t)n*nc,sizeof(double));
  for(int i=-w;i<n;i++)for(int c=0;c<nc;c++){
    double t0=now();pid_t p=fork();
    if(!p){int fd=open(payload,O_RDONLY);dup2(fd,0);close(fd);int nul=open("/dev/null",O_WRONLY);dup2(nul,1);execve(cmds[c][0],cmds[c],environ);_exit(127);}
    int st;waitpid(p,&st,0);double dt=now()-t0;
    if(!WIFEXITED(st)||WEXITSTATUS(st)){fprintf(stderr,"%s failed\n",cmds[c][0]);return 1;}
    if(i>=0)times[c*n+i]=dt;}
  for(int c=0;c<nc;c++){double*t=times+c*n;qsort(t,n,sizeof(double),cmp);double s=0;for(int i=0;i<n;i++)s+=t[i];
    printf("%-40s p50 %.2f  p90 %.2f  p99 %.2f  min %.2f  mean %.2f ms\n",argv[4+c],t[n/2],t[n*9/10],t[n*99/100],t[0],s/n);}
  return 0;}
