/* Placeholder so libfsrt.a is never empty; removed when the runtime lands. */
int fs_runtime_placeholder;
