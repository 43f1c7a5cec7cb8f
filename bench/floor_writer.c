/* The writing floor: mkdir, mkdir, open, write, close per document, nothing more.
 * Reads "<id> <document>\n" lines on stdin and writes each document to
 * <root>/away/api/articles/<id>/rating/index.json, through a descriptor of the
 * articles folder, as the generator does. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: floor_writer ARTICLES_DIR < documents\n"); return 2; }
    int dir = open(argv[1], O_RDONLY | O_DIRECTORY);
    if (dir < 0) { perror(argv[1]); return 1; }
    char *line = NULL, path[64];
    size_t capacity = 0;
    ssize_t length;
    while ((length = getline(&line, &capacity, stdin)) > 0) {
        char *document = strchr(line, ' ');
        if (!document) return 1;
        *document++ = '\0';
        size_t size = (size_t)(line + length - document);
        snprintf(path, sizeof path, "%s", line);
        if (mkdirat(dir, path, 0777)) { perror(path); return 1; }
        snprintf(path, sizeof path, "%s/rating", line);
        if (mkdirat(dir, path, 0777)) { perror(path); return 1; }
        snprintf(path, sizeof path, "%s/rating/index.json", line);
        int fd = openat(dir, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, document, size) != (ssize_t)size || close(fd)) { perror(path); return 1; }
    }
    return 0;
}
