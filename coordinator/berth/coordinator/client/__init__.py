"""The asyncio member library and admin client Berth's consumer pods and operator use."""
