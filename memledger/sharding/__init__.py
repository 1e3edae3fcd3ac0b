"""Users across PostgreSQL servers (docs/scale.md): ``shardmap`` (the shard map file and rendezvous hashing),
``directory`` (placements, the ring, write leases), ``sharded`` (``ShardedLedger``: routing each verb by user) and
``rebalance`` (moving users when the map changes)."""
