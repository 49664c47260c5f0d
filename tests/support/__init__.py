"""What the tests share and are not tests themselves: service processes, factories, scripted models and tools,
stream checks, HTTP and browser helpers."""
