"""What a run leaves behind and reads back: checkpoint files, logdirs in object storage, learning curves
drawn from them, and videos of a trained agent."""
