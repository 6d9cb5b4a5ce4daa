-- spendAllocClear (shared/spend/allocation-script.ts): removes a plan-day's allocation fields (a
-- deployment back to one region). An emptied hash disappears (Redis drops empty hashes): a state
-- the pacer alone created is gone.
-- KEYS: state. Reply: the number of fields removed.
return redis.call('HDEL', KEYS[1], 'a', 'ae', 'ag', 'ar', 'ax', 'ac', 'aw', 'u')
