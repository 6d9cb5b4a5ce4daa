-- spendUnlock (shared/spend/reconcile.ts): releases a rebuild lock only if it is still ours (a lock
-- that expired may belong to another process).
-- KEYS: lock. ARGV: token. Reply: 1 deleted, 0 not ours (or gone).
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
