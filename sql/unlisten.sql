-- End this session's subscription to a channel (a name shardq sets, quoted as an identifier).
UNLISTEN {channel}
