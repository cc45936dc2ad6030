-- Subscribe this session to a channel (a name shardq sets, quoted as an identifier).
LISTEN {channel}
