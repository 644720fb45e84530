/* dtrain-post's commands by name: its dispatch and dtrain --help list them
 * from here. */
#include "post/post.h"

#include <stddef.h>

const char *const post_command_names[] = { "csv", "plot", "summary", "simplot", "sample", NULL };
