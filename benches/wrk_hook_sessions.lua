-- Events spread over WB_SESSIONS sessions (64 unless set), every body unique.
local sessions = tonumber(os.getenv("WB_SESSIONS") or "64")
counter = 0
local tid = math.random(1, 1000000000)
request = function()
  counter = counter + 1
  local body = '{"event_id": ' .. counter .. ', "event_type": "help_needed", "payload": "bench", "session_id": "s", "timestamp": "2026-11-30T10:57:47.' .. tid .. '", "channel": "session:bench-' .. (counter % sessions) .. '", "correlation_id": null, "signal_level": "actionable"}'
  return wrk.format("POST", "/hook", {["Content-Type"]="application/json"}, body)
end
