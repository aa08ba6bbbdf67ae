"""The Lua scripts Redis runs for admission: each is atomic, and reads Redis's own clock (TIME),
so gateways on hosts whose clocks disagree still share one timeline.

Times are microseconds. The request and token rates are GCRA: a key holds the client's
theoretical arrival time (TAT); an admission of cost c moves it to max(TAT, now) + c * 60 s /
limit and is refused when that lands more than a minute ahead, so a whole minute's allowance may
come in a burst and the rest at the limit's pace (no fixed window to straddle). In-flight
requests are a sorted set of leases scored by their expiry: a lease not renewed (its gateway
died) drops out within its lease time. A budget is one integer key per client and period,
micro-dollars spent and reserved.

Every script that counts checks the shared state's epoch first: a random id written once, with
no expiry, so a Redis that restarted empty (or was flushed) has a new one. A gateway counts only
in the epoch it knows; when it finds another, it puts its own part back into it (`RESTORE`: what
it settled this budget period and the reservations it still holds) before it counts again.
"""

from __future__ import annotations

# KEYS: requests TAT, tokens TAT, leases, budget, epoch.
# ARGV: rpm, tpm, tokens, max_concurrent, lease id, lease ms, budget (-1: none), reserve,
#       budget key ttl s, the epoch the gateway knows.
# Returns: refused ("" | "requests" | "tokens" | "concurrency" | "budget" | "epoch": nothing
#          was counted), retry ms, requests remaining, requests reset ms, tokens remaining,
#          tokens reset ms, the budget's micro-dollars spent and reserved (-1: no budget).
ADMIT = """
if redis.call('GET', KEYS[5]) ~= ARGV[10] then return {'epoch', 0, 0, 0, 0, 0, -1} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local WINDOW = 60000000
local rpm, tpm, tokens = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local max_c, lease_ms = tonumber(ARGV[4]), tonumber(ARGV[6])
local budget, reserve = tonumber(ARGV[7]), tonumber(ARGV[8])

local function start_of(key)
  local tat = tonumber(redis.call('GET', key))
  if tat == nil or tat < now then return now end
  return tat
end

local refused, wait = '', 0
local r_start, r_new, r_int, t_start, t_new, t_int, t_cost
if rpm > 0 then
  r_int = WINDOW / rpm
  r_start = start_of(KEYS[1])
  r_new = r_start + r_int
  if r_new - WINDOW > now then refused, wait = 'requests', r_new - WINDOW - now end
end
if tpm > 0 then
  t_int = WINDOW / tpm
  t_cost = math.min(tokens, tpm)
  t_start = start_of(KEYS[2])
  t_new = t_start + t_cost * t_int
  if t_new - WINDOW > now and refused == '' then refused, wait = 'tokens', t_new - WINDOW - now end
end
local now_ms = math.floor(now / 1000)
if refused == '' and max_c > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now_ms)
  if redis.call('ZCARD', KEYS[3]) >= max_c then refused, wait = 'concurrency', 1000000 end
end
if refused == '' and budget >= 0 then
  local spent = tonumber(redis.call('GET', KEYS[4]) or '0')
  if spent + reserve > budget then refused = 'budget' end
end
if refused == '' then
  if rpm > 0 then
    redis.call('SET', KEYS[1], string.format('%d', math.floor(r_new)), 'PX',
      math.floor((r_new - now) / 1000) + 1000)
    r_start = r_new
  end
  if tpm > 0 then
    redis.call('SET', KEYS[2], string.format('%d', math.floor(t_new)), 'PX',
      math.floor((t_new - now) / 1000) + 1000)
    t_start = t_new
  end
  if max_c > 0 then
    redis.call('ZADD', KEYS[3], now_ms + lease_ms, ARGV[5])
    redis.call('PEXPIRE', KEYS[3], 2 * lease_ms)
  end
  if budget >= 0 then
    redis.call('INCRBY', KEYS[4], reserve)
    redis.call('EXPIRE', KEYS[4], tonumber(ARGV[9]))
  end
end
local r_left, r_reset, t_left, t_reset = -1, 0, -1, 0
if rpm > 0 then
  r_left = math.max(0, math.floor((WINDOW - (r_start - now)) / r_int))
  r_reset = math.floor((r_start - now) / 1000)
end
if tpm > 0 then
  t_left = math.max(0, math.floor((WINDOW - (t_start - now)) / t_int))
  t_reset = math.floor((t_start - now) / 1000)
end
local total = -1
if budget >= 0 then total = tonumber(redis.call('GET', KEYS[4]) or '0') end
return {refused, math.ceil(wait / 1000), r_left, r_reset, t_left, t_reset, total}
"""

# KEYS: epoch, ledger, the gateway's last settled call, then each budget's key, then each
#       settlement's tokens TAT and leases.
# ARGV: the epoch the gateway knows, the ledger's oldest id to keep, how many budgets,
#       settlements and ledger entries, the fields of a ledger entry, the call's number (the
#       gateway's calls count up from 1); then per budget the micro-dollars to add and the key's
#       ttl s; per settlement tpm, the tokens to add (a refund is negative) and the lease id; per
#       ledger entry its fields and values.
# What one gateway settled since its last call: reservations become what was used (unused
# tokens and money go back, more is charged), leases end, entries join the ledger. Counts only
# in the known epoch (returns {0} then, having written the ledger alone); else {1, and each
# budget's micro-dollars after}. A call whose number was settled already (its reply was lost on
# the way, and the gateway sent it again) changes nothing and answers the same way; the number
# is kept a week after the gateway's last call.
SETTLE = """
local same = redis.call('GET', KEYS[1]) == ARGV[1]
local n_money, n_settle, n_entries = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local width = 2 * tonumber(ARGV[6])
local number = tonumber(ARGV[7])
local a, k = 8, 3
local totals = {1}
if tonumber(redis.call('GET', KEYS[3]) or '0') >= number then
  if not same then return {0} end
  for i = 1, n_money do totals[i + 1] = tonumber(redis.call('GET', KEYS[k + i]) or '0') end
  return totals
end
redis.call('SET', KEYS[3], number, 'EX', 604800)
if same then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  for i = 1, n_money do
    local key = KEYS[k + i]
    local total = redis.call('INCRBY', key, tonumber(ARGV[a]))
    if total < 0 then total = 0; redis.call('SET', key, 0) end
    if redis.call('TTL', key) < 0 then redis.call('EXPIRE', key, tonumber(ARGV[a + 1])) end
    totals[i + 1] = total
    a = a + 2
  end
  k = k + n_money
  for i = 1, n_settle do
    local tpm, delta = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
    local key = KEYS[k + 1]
    if tpm > 0 and delta ~= 0 then
      local tat = tonumber(redis.call('GET', key)) or now
      if delta > 0 and tat < now then tat = now end
      local new = tat + delta * 60000000 / tpm
      if new > now then
        redis.call('SET', key, string.format('%d', math.floor(new)), 'PX',
          math.floor((new - now) / 1000) + 1000)
      else
        redis.call('DEL', key)
      end
    end
    redis.call('ZREM', KEYS[k + 2], ARGV[a + 2])
    a, k = a + 3, k + 2
  end
else
  a = a + 2 * n_money + 3 * n_settle
end
for i = 1, n_entries do
  redis.call('XADD', KEYS[2], 'MINID', '~', ARGV[2], '*', unpack(ARGV, a, a + width - 1))
  a = a + width
end
if same then return totals end
return {0}
"""

# KEYS: epoch, then each budget's key, then each held reservation's tokens TAT and leases.
# ARGV: the epoch the gateway knows, a new epoch (written when there is none), how many budgets
#       and reservations; per budget the micro-dollars it holds at least and the key's ttl s;
#       per reservation tpm, its tokens, its lease id, the lease ms (0: no concurrency limit).
# Returns the epoch, and 1 when it was new to the gateway and its part was put back into it.
# A budget is raised to what the gateway last saw there plus what it owes since: gateways that
# put theirs back one after the other leave the largest, and the spend of one that died is in
# what the others saw.
RESTORE = """
redis.call('SET', KEYS[1], ARGV[2], 'NX')
local epoch = redis.call('GET', KEYS[1])
if epoch == ARGV[1] then return {epoch, 0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now / 1000)
local n_money, n_held = tonumber(ARGV[3]), tonumber(ARGV[4])
local a, k = 5, 1
for i = 1, n_money do
  local key = KEYS[k + i]
  local least = tonumber(ARGV[a])
  if tonumber(redis.call('GET', key) or '0') < least then
    redis.call('SET', key, least, 'EX', tonumber(ARGV[a + 1]))
  end
  a = a + 2
end
k = k + n_money
for i = 1, n_held do
  local tpm, tokens, lease_ms = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 3])
  if tpm > 0 then
    local key = KEYS[k + 1]
    local tat = tonumber(redis.call('GET', key)) or now
    if tat < now then tat = now end
    local new = tat + math.min(tokens, tpm) * 60000000 / tpm
    redis.call('SET', key, string.format('%d', math.floor(new)), 'PX',
      math.floor((new - now) / 1000) + 1000)
  end
  if lease_ms > 0 then
    redis.call('ZADD', KEYS[k + 2], now_ms + lease_ms, ARGV[a + 2])
    redis.call('PEXPIRE', KEYS[k + 2], 2 * lease_ms)
  end
  a, k = a + 4, k + 2
end
return {epoch, 1}
"""

# KEYS: leases. ARGV: lease ms, then the lease ids this gateway still holds.
RENEW = """
local t = redis.call('TIME')
local expiry = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[i])
end
return 1
"""

# KEYS: the gateways alive, epoch. ARGV: this gateway's id, how long a heartbeat counts (ms).
# Returns how many gateways sent one within that time, this one included, and the epoch ("" when
# there is none).
HEARTBEAT = """
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now_ms, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], 10 * tonumber(ARGV[2]))
return {redis.call('ZCARD', KEYS[1]), redis.call('GET', KEYS[2]) or ''}
"""
