"""A model's family: the derivatives the Hub lists under a base (`derivatives`), their own history at the
base's budget (`derivative_history`), and the lineage of behaviour that tells whether a copy carries a base's
fix (`lineage`)."""
