/* A private temporary directory for the tests that write files (test_data,
 * test_tokens): tmpdir_make creates it under $TMPDIR (else /tmp), tmp_path
 * names a file in it, remove_tree deletes it at the end. */
#ifndef DT_TESTS_TMPDIR_H
#define DT_TESTS_TMPDIR_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

/* <tmpdir>/name; four results stay valid at once (a call may name two files) */
static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int slot = 0;
    slot = (slot + 1) % 4;
    snprintf(buf[slot], sizeof buf[slot], "%s/%s", tmpdir, name);
    return buf[slot];
}

/* 0, or 1 after a "Bail out!" line */
static int tmpdir_make(const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/dtrain-test-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(tmpdir)) {
        printf("Bail out! mkdtemp %s failed\n", tmpdir);
        return 1;
    }
    return 0;
}

/* dir and everything under it; a symbolic link is removed, not followed */
static void remove_tree(const char *dir)
{
    DIR *dp = opendir(dir);
    struct dirent *e;
    char p[1024];
    if (!dp)
        return;
    while ((e = readdir(dp)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    closedir(dp);
    rmdir(dir);
}

#endif
