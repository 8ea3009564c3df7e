"""IndexTTS-1.5's data: its codes manifest format (``format``)."""
