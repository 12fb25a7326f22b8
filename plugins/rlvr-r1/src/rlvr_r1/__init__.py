"""DeepSeek-R1 rule-based rewards (accuracy, format, language consistency) for rlvr-plugins."""
