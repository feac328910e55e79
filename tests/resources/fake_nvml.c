/* tests/resources/fake_nvml.c: a scripted stand-in for libnvidia-ml (the functions lp_core uses).
 *
 * State is re-read from $FAKE_NVML_STATE at every call, so a test scripts utilisation between
 * samples. Lines:  "init fail"  |  "device <busy|-1> [pid:util ...]"  |  "procfail <index>".
 * busy -1 makes nvmlDeviceGetUtilizationRates fail for that device. Each
 * nvmlDeviceGetProcessUtilization call appends "<index> <lastSeenTimeStamp>" to $FAKE_NVML_LOG.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

#define MAXD 16
#define MAXP 64
static int g_ndev, g_init_fail, g_busy[MAXD], g_np[MAXD], g_procfail[MAXD];
static unsigned g_pid[MAXD][MAXP], g_util[MAXD][MAXP];

static void load(void) {
  const char* path = getenv("FAKE_NVML_STATE");
  FILE* f = path ? fopen(path, "r") : NULL;
  g_ndev = 0;
  g_init_fail = 0;
  memset(g_procfail, 0, sizeof g_procfail);
  if (!f) return;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "init fail", 9) == 0) g_init_fail = 1;
    if (strncmp(line, "procfail ", 9) == 0) {
      int i = atoi(line + 9);
      if (i >= 0 && i < MAXD) g_procfail[i] = 1;
    }
    if (strncmp(line, "device ", 7) == 0 && g_ndev < MAXD) {
      int d = g_ndev++;
      char* p = line + 7;
      g_busy[d] = (int)strtol(p, &p, 10);
      g_np[d] = 0;
      for (;;) {
        while (*p == ' ') ++p;
        if (*p < '0' || *p > '9' || g_np[d] >= MAXP) break;
        g_pid[d][g_np[d]] = (unsigned)strtoul(p, &p, 10);
        if (*p != ':') break;
        g_util[d][g_np[d]] = (unsigned)strtoul(p + 1, &p, 10);
        g_np[d]++;
      }
    }
  }
  fclose(f);
}

int nvmlInit_v2(void) {
  load();
  return g_init_fail ? 999 : 0;
}
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int* n) {
  load();
  *n = (unsigned)g_ndev;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** dev) {
  if ((int)i >= g_ndev) return 2;
  *dev = (void*)(uintptr_t)(i + 1);
  return 0;
}
int nvmlDeviceGetUtilizationRates(void* dev, nvmlUtilization_t* u) {
  load();
  int i = (int)(uintptr_t)dev - 1;
  if (i < 0 || i >= g_ndev || g_busy[i] < 0) return 999;
  u->gpu = (unsigned)g_busy[i];
  u->memory = 0;
  return 0;
}
int nvmlDeviceGetProcessUtilization(void* dev, nvmlProcessUtilizationSample_t* s, unsigned int* n,
                                    unsigned long long last_seen) {
  load();
  int i = (int)(uintptr_t)dev - 1;
  if (i < 0 || i >= g_ndev) return 2;
  if (s) {
    const char* log = getenv("FAKE_NVML_LOG");
    FILE* f = log ? fopen(log, "a") : NULL;
    if (f) {
      fprintf(f, "%d %llu\n", i, last_seen);
      fclose(f);
    }
  }
  if (g_procfail[i]) return 999;
  if (g_np[i] == 0) return 6; /* NVML_ERROR_NOT_FOUND: no process ran in the window */
  if (!s || *n < (unsigned)g_np[i]) {
    *n = (unsigned)g_np[i];
    return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
  }
  for (int k = 0; k < g_np[i]; ++k) {
    memset(&s[k], 0, sizeof s[k]);
    s[k].pid = g_pid[i][k];
    s[k].timeStamp = last_seen + 1000000ull;
    s[k].smUtil = g_util[i][k];
  }
  *n = (unsigned)g_np[i];
  return 0;
}
