"""Static JSON rating API: ratings.yaml in, one JSON document per article out."""
