// appended into alloc.ts mode 'diag'
