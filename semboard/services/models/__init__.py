"""The model track: encoders uploaded whole or in parts, checked and queued for a job."""
