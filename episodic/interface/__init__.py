"""interface"""
