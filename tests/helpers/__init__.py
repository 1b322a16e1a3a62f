"""What several tests share: reading MLflow runs back, small models and files, free ports,
and the stand-ins and callbacks the end-to-end tests run with."""
