/* The file fixtures shared by the bad-input programs that save and load
 * (bad_input_index.c and bad_input_index_*.c): a private
 * directory `dir` under $TMPDIR (or /tmp) holding an empty file, a garbage
 * file, a truncated copy of a saved file, a subdirectory and a FIFO (a
 * load must refuse it without blocking, a save must not replace it), with the paths
 * of a missing file and of a new file; and the helpers that look at it.
 *
 *   bi_files_open("index", "lshk"); creates dir, names the paths (*.lshk)
 *   ... save the program's own files into dir ...
 *   bi_files_fill(garbage, sizeof garbage, saved_path);
 *   ... the cases ...
 *   ... remove the program's own files ...
 *   bi_files_close();              removes the rest; dir must then be empty
 *
 * Define _POSIX_C_SOURCE 200809L before the first include. */
#ifndef LSHK_BAD_INPUT_FILES_H
#define LSHK_BAD_INPUT_FILES_H

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bad_input.h"

static char dir[256];
static char path_empty[300], path_garbage[300], path_truncated[300],
    path_missing[300], path_new[300], path_subdir[300], path_fifo[300];

static inline int file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}
/* Entries of `dir` (minus . and ..). */
static inline int dir_entries(void) {
  int n = 0;
  DIR *d = opendir(dir);
  struct dirent *e;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}
static inline void write_file(const char *p, const void *data, size_t len) {
  FILE *f = fopen(p, "wb");
  if (f == NULL || (len > 0 && fwrite(data, 1, len, f) != len)) {
    fprintf(stderr, "cannot write %s\n", p);
    exit(2);
  }
  fclose(f);
}
static inline unsigned char *read_file(const char *p, size_t *len) {
  FILE *f = fopen(p, "rb");
  unsigned char *buf;
  long n;
  if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) exit(2);
  rewind(f);
  buf = (unsigned char *)malloc((size_t)n + 1);
  if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) exit(2);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* Creates `dir` (lshk-bad-input-NAME-PID) and names the shared paths
 * (`empty.EXT`, `garbage.EXT`, `truncated.EXT`, `missing.EXT`, `new.EXT`,
 * `subdir`, `fifo.EXT`); exits with 2 when the directory cannot be created. */
static inline void bi_files_open(const char *name, const char *ext) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/lshk-bad-input-%s-%ld",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp", name, (long)getpid());
  if (mkdir(dir, 0700) != 0) {
    fprintf(stderr, "cannot create %s\n", dir);
    exit(2);
  }
  snprintf(path_empty, sizeof path_empty, "%s/empty.%s", dir, ext);
  snprintf(path_garbage, sizeof path_garbage, "%s/garbage.%s", dir, ext);
  snprintf(path_truncated, sizeof path_truncated, "%s/truncated.%s", dir, ext);
  snprintf(path_missing, sizeof path_missing, "%s/missing.%s", dir, ext);
  snprintf(path_new, sizeof path_new, "%s/new.%s", dir, ext);
  snprintf(path_subdir, sizeof path_subdir, "%s/subdir", dir);
  snprintf(path_fifo, sizeof path_fifo, "%s/fifo.%s", dir, ext);
}

/* Writes the empty file, the garbage file (`garbage`, `len` bytes), the
 * first half of the saved file `saved` as the truncated one, the
 * subdirectory and the FIFO. */
static inline void bi_files_fill(const char *garbage, size_t len, const char *saved) {
  unsigned char *data;
  size_t n;
  write_file(path_empty, "", 0);
  write_file(path_garbage, garbage, len);
  data = read_file(saved, &n);
  write_file(path_truncated, data, n / 2);
  free(data);
  if (mkdir(path_subdir, 0700) != 0) exit(2);
  if (mkfifo(path_fifo, 0600) != 0) exit(2);
}

/* Removes the shared files and `dir`, which must then be empty (any file a
 * case left behind is a failure). */
static inline void bi_files_close(void) {
  remove(path_empty);
  remove(path_garbage);
  remove(path_truncated);
  rmdir(path_subdir);
  remove(path_fifo);
  if (rmdir(dir) != 0) {
    fprintf(stderr, "%s is not empty after the cases\n", dir);
    bi_failed++;
  }
}

#endif
